/**
 * Every service has the anatomy `docs/extending.md` describes, and the lint rule that keeps its
 * consumers thin fires. The extending guide runs this file in its copy of the repository, after
 * `pnpm new service` and `pnpm new consumer`, so a scaffolded service is held to it as well.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVICE_NAMES } from '@idem/shop';
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { default: config } = (await import(new URL('../../eslint.config.js', import.meta.url).href)) as {
  default: Linter.Config[];
};
const LAYERS = ['application', 'consumers', 'domain', 'http'];
const PRISMA = ['generated', 'prisma'];

const foldersOf = (service: string) =>
  readdirSync(join(root, 'services', service, 'src'), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();

describe('the anatomy of a service', () => {
  it.each(SERVICE_NAMES)(
    '%s has domain/, application/, consumers/, http/, workers/ when it runs a loop, providers/ when it calls one',
    (service) => {
      const source = (file: string) => readFileSync(join(root, 'services', service, 'src', file), 'utf8');
      const runsALoop = /\bworker\('/.test(source('service.ts'));
      const callsAProvider = existsSync(join(root, 'services', service, 'src/providers'));
      const layers = [...LAYERS, ...(runsALoop ? ['workers'] : []), ...(callsAProvider ? ['providers'] : [])].sort();
      expect(foldersOf(service).filter((folder) => !PRISMA.includes(folder))).toEqual(layers);
    },
  );

  it.each(SERVICE_NAMES)("%s keeps its SQL in application/, behind its use cases' functions", (service) => {
    const sourcesOf = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) return ['generated', 'application'].includes(entry.name) ? [] : sourcesOf(path);
        return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
      });
    const querying = /\$(queryRaw|executeRaw)|\b(db|tx)\.\w+\.(find\w*|create\w*|update\w*|upsert|delete\w*|count)\(/;
    const elsewhere = sourcesOf(join(root, 'services', service, 'src')).filter((file) =>
      querying.test(readFileSync(file, 'utf8')),
    );
    expect(elsewhere).toEqual([]);
  });

  it('keeps consumers thin: lint refuses a consumer that writes with tx or enqueues', async () => {
    // The repository's rules without the type-aware ones, so a file that is not on disk can be linted.
    const eslint = new ESLint({
      cwd: root,
      overrideConfigFile: true,
      overrideConfig: [
        ...config,
        tseslint.configs.disableTypeChecked,
        { languageOptions: { parserOptions: { projectService: false } } },
      ],
    });
    const lint = async (path: string, text: string) =>
      (await eslint.lintText(text, { filePath: join(root, path) }))
        .flatMap((result) => result.messages)
        .map((message) => message.message);
    const planted = [
      "import { enqueue } from '@idem/outbox';",
      'export const handle = async (tx: { stock: { update(): Promise<void> } }) => {',
      '  await tx.stock.update();',
      '  return enqueue;',
      '};',
      '',
    ].join('\n');
    expect(existsSync(join(root, 'services/inventory/src/consumers'))).toBe(true);
    expect(await lint('services/inventory/src/consumers/planted.ts', planted)).toEqual([
      'A consumer never enqueues: the use case in application/ does, with its change.',
      'A consumer never writes: call a use case in application/ with tx.',
    ]);
    // The same code is a use case's to write.
    expect(await lint('services/inventory/src/application/planted.ts', planted)).toEqual([]);
  });
});
