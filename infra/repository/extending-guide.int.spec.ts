/**
 * docs/extending.md, followed as a reader would: in a copy of this repository (what git tracks
 * or would track, as it is now), it runs each `sh guide` block's commands and applies each code
 * block that names a file — the whole file, inserted `before`/`after` a line, in `replace` of
 * one, or appended.
 * Right after `pnpm new service`, before any hand step, the anatomy test passes on the new
 * service as the scaffold wrote it. The guide's last steps typecheck everything and run the new
 * service's tests.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pnpm } from '@idem/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { root } from './compose-file.js';

export type GuideStep =
  | { readonly kind: 'run'; readonly args: readonly string[] }
  | {
      readonly kind: 'write';
      readonly file: string;
      readonly at: 'file' | 'before' | 'after' | 'replace' | 'append';
      readonly anchor?: string;
      readonly text: string;
    };

/** The steps of a guide, in order: its `sh guide` blocks and its code blocks that name a file. */
export function stepsOf(markdown: string): GuideStep[] {
  const steps: GuideStep[] = [];
  for (const [, info, body] of markdown.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)) {
    if (/^sh guide\b/.test(info!)) {
      for (const line of body!.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'))) {
        const [command, ...args] = line.trim().split(/\s+/);
        if (command !== 'pnpm') throw new Error(`a guide runs pnpm commands only: ${line}`);
        steps.push({ kind: 'run', args });
      }
      continue;
    }
    const file = / file=(\S+)/.exec(info!)?.[1];
    if (!file) continue;
    const placed = / (before|after|replace)="([^"]+)"/.exec(info!);
    const at = placed ? (placed[1] as 'before' | 'after' | 'replace') : / append\b/.test(info!) ? 'append' : 'file';
    steps.push({ kind: 'write', file, at, ...(placed ? { anchor: placed[2] } : {}), text: body! });
  }
  return steps;
}

function apply(dir: string, step: Extract<GuideStep, { kind: 'write' }>): void {
  const path = join(dir, step.file);
  if (step.at === 'file') {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, step.text);
    return;
  }
  const source = readFileSync(path, 'utf8');
  if (step.at === 'append') return writeFileSync(path, `${source.replace(/\n*$/, '\n\n')}${step.text}`);
  const lines = source.split('\n');
  const matches = lines.flatMap((line, index) => (line.includes(step.anchor!) ? [index] : []));
  if (matches.length !== 1)
    throw new Error(`${step.file}: ${matches.length} lines contain "${step.anchor}"; the guide needs exactly one`);
  const at = step.at === 'after' ? matches[0]! + 1 : matches[0]!;
  lines.splice(at, step.at === 'replace' ? 1 : 0, ...step.text.replace(/\n$/, '').split('\n'));
  writeFileSync(path, lines.join('\n'));
}

const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: root })
  .toString()
  .split('\0')
  .filter((file) => file && existsSync(join(root, file)));
const copy = mkdtempSync(join(tmpdir(), 'idem-guide-'));
afterAll(() => rmSync(copy, { recursive: true, force: true }));

describe('docs/extending.md', () => {
  const steps = stepsOf(readFileSync(join(root, 'docs/extending.md'), 'utf8'));

  it('has steps: commands to run and code to write', () => {
    expect(steps.filter((s) => s.kind === 'run').map((s) => s.args.join(' '))).toContain('new service shipping');
    expect(steps.filter((s) => s.kind === 'write').length).toBeGreaterThan(10);
  });

  it(
    'adds a fifth service, scaffolded with its anatomy, that passes typecheck, its tests and the registry test',
    { timeout: 900_000 },
    () => {
      for (const file of tracked) cpSync(join(root, file), join(copy, file), { recursive: true });
      // As a fresh clone starts. CI=false: `pnpm install` after `pnpm new service` updates the
      // lockfile, as it does on a developer's machine.
      const env = { ...process.env, CI: 'false' };
      pnpm(copy, ['install', '--frozen-lockfile', '--prefer-offline'], env);
      let printed = '';
      let scaffolded = '';
      for (const step of steps) {
        if (step.kind === 'write') apply(copy, step);
        else printed = pnpm(copy, step.args[0] === 'install' ? [...step.args, '--prefer-offline'] : step.args, env);
        // The service as `pnpm new service` wrote it, before any hand step, has the anatomy.
        if (step.kind === 'run' && step.args.join(' ') === 'new service shipping')
          scaffolded = pnpm(
            copy,
            // verbose: each test's name is printed, the new service's among them.
            [
              'exec',
              'vitest',
              'run',
              '--reporter=verbose',
              '--project',
              'unit',
              'infra/repository/anatomy.unit.spec.ts',
            ],
            env,
          );
      }
      expect(scaffolded).toMatch(/shipping has domain\/, application\/, consumers\/, http\//);
      expect(scaffolded).not.toMatch(/\bfailed\b/);
      // The last step ran the tests: the generated ones and the guide's, all passing.
      for (const spec of [
        'services/shipping/src/consumers/payment-captured.int.spec.ts',
        'services/shipping/src/consumers/one-shipment-per-order.int.spec.ts',
        'services/shipping/src/shipping.int.spec.ts',
        'services/shipping/src/prisma/schema.int.spec.ts',
        'services/notifications/src/consumers/shipment-created.int.spec.ts',
        'infra/repository/service-registry.unit.spec.ts',
        'infra/repository/anatomy.unit.spec.ts',
      ])
        expect(printed).toContain(spec);
      expect(printed).not.toMatch(/\bfailed\b/);
      const registry = readFileSync(join(copy, 'packages/shop/src/services.ts'), 'utf8');
      expect(registry).toContain('shipping: { port: 3005 }');
      expect(readFileSync(join(copy, 'docs/openapi/shipping.json'), 'utf8')).toContain('/shipments');
    },
  );
});
