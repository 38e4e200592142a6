/**
 * The architecture's dependency rules (`.dependency-cruiser.mjs`, run by `pnpm lint`) fire: each
 * planted violation, in a scratch tree laid out like this repository, is reported under its rule,
 * and the same tree without them passes.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'idem-dependency-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Writes a scratch tree and returns the rules dependency-cruiser reports for it. */
function violations(name: string, files: Record<string, string>): string[] {
  const dir = join(scratch, name);
  const tree: Record<string, string> = {
    'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } }),
    'packages/http/src/index.ts': 'export const route = 1;\n',
    'services/shop/src/domain/order.ts': 'export const decide = () => 1;\n',
    'services/shop/src/application/place.ts':
      "import { decide } from '../domain/order.js';\nexport const place = decide;\n",
    'services/shop/src/consumers/paid.ts':
      "import { place } from '../application/place.js';\nexport const paid = place;\n",
    'services/shop/src/consumers/placed.ts': 'export const placed = 1;\n',
    ...files,
  };
  for (const [path, text] of Object.entries(tree)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const output = execFileSync(
    join(root, 'node_modules/.bin/depcruise'),
    ['packages', 'services', '--config', join(root, '.dependency-cruiser.mjs'), '--output-type', 'json'],
    { cwd: dir, encoding: 'utf8' },
  );
  const result = JSON.parse(output) as { summary: { violations: { rule: { name: string } }[] } };
  return [...new Set(result.summary.violations.map((v) => v.rule.name))].sort();
}

describe('the dependency rules', () => {
  it('pass a tree laid out as the anatomy says', () => {
    expect(violations('clean', {})).toEqual([]);
  }, 30_000);

  it('fire on an application that speaks HTTP, a consumer importing another, an impure domain, a cycle', () => {
    expect(
      violations('planted', {
        'services/shop/src/application/place.ts':
          "import { route } from '../../../../packages/http/src/index.js';\nexport const place = route;\n",
        'services/shop/src/consumers/paid.ts': "import { placed } from './placed.js';\nexport const paid = placed;\n",
        'services/shop/src/domain/order.ts':
          "import { readFileSync } from 'node:fs';\nimport { place } from '../application/place.js';\nexport const decide = () => [readFileSync, place];\n",
        'services/shop/src/consumers/placed.ts': "import { paid } from './paid.js';\nexport const placed = paid;\n",
      }),
    ).toEqual(['application-speaks-no-http', 'consumers-never-import-each-other', 'domain-is-pure', 'no-circular']);
  }, 30_000);
});
