/**
 * docs/operations.md says what the code does: its problem types table is the text each service
 * serves at a problem's `type`, and every variable a process reads is in its configuration table: each service's
 * configuration schema, what the packages read themselves, and what the native run and the
 * tests read. A variable the code reads and the table does not name is a setting nobody can find.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MEANINGS, problemType, STATUS_OF, type ErrorCode } from '@idem/http';
import { SERVICE_NAMES } from '@idem/shop';
import { describe, expect, it } from 'vitest';
import { root } from './compose-file.js';
import { READ_ELSEWHERE, SERVICE_CONFIGS } from './service-configs.js';

/** Read by `pnpm start` (infra/native-run) and by the tests, not by a service. */
const NATIVE_RUN_AND_TESTS = [
  'POSTGRES_URL',
  'IDEM_BIND_ADDRESS',
  'IDEM_PORT_OFFSET',
  'IDEM_SYSTEM',
  'IDEM_REPLICAS',
  'TEST_POSTGRES_URL',
  'CHROMIUM_PATH',
];

/** The variables named in backticks in the first column of the table under "## Configuration". */
function documentedVariables(operations: string): Set<string> {
  const section = operations.split(/^## Configuration$/m)[1]!.split(/^## /m)[0]!;
  const firstCells = section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => line.split('|')[1]!);
  return new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)));
}

describe("docs/operations.md's configuration table", () => {
  it('names every variable the processes and the tests read', () => {
    const documented = documentedVariables(readFileSync(join(root, 'docs/operations.md'), 'utf8'));
    const read = new Set([
      ...SERVICE_NAMES.flatMap((service) => Object.keys(SERVICE_CONFIGS[service].config.shape)),
      ...READ_ELSEWHERE,
      ...NATIVE_RUN_AND_TESTS,
    ]);
    expect([...read].filter((name) => !documented.has(name)).sort()).toEqual([]);
  });

  it('would notice one missing', () => {
    const table =
      '## Configuration\n\n| variable | default |\n| --- | --- |\n| `PORT` / `HOST` | 3001 |\n\n## Next\n| `NOT_THIS` |';
    expect([...documentedVariables(table)]).toEqual(['PORT', 'HOST']);
  });
});

describe("docs/operations.md's problem types", () => {
  it('list every problem with its status and the meaning its `type` serves', () => {
    const operations = readFileSync(join(root, 'docs/operations.md'), 'utf8');
    const section = operations.split(/^## Problem types$/m)[1]!.split(/^## /m)[0]!;
    const rows = section
      .split('\n')
      .filter((line) => line.startsWith('| `/problems/'))
      .map((line) =>
        line
          .split('|')
          .slice(1, -1)
          .map((cell) => cell.trim()),
      );
    expect(rows).toEqual(
      (Object.keys(MEANINGS) as ErrorCode[]).map((code) => [
        `\`${problemType(code)}\``,
        String(STATUS_OF[code]),
        MEANINGS[code],
      ]),
    );
  });
});
