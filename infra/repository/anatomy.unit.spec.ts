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
    '%s has domain/, application/, consumers/, http/, and workers/ when it runs a loop',
    (service) => {
      const runsALoop = /\bworker\('/.test(readFileSync(join(root, 'services', service, 'src/service.ts'), 'utf8'));
      const layers = [...LAYERS, ...(runsALoop ? ['workers'] : [])].sort();
      expect(foldersOf(service).filter((folder) => !PRISMA.includes(folder))).toEqual(layers);
    },
  );

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
