/**
 * The workspace's packages depend on each other as a tree but for one known loop: no package reaches
 * itself through its dependencies of any kind (runtime, dev, peer), so each builds and tests after
 * what it needs. The loop left is the test kit's: it migrates the inbox's and outbox's tables
 * (runtime dependencies), and their own tests use it (dev dependencies). A service lifted out of
 * this repository takes the kit with it and installs those two packages from their tarballs, so
 * the kit imports them rather than reading their folders here (docs/lifting-out.md).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './compose-file.js';

/** Each workspace package's name, and the workspace packages it depends on in any field. */
function workspaceGraph(): Map<string, string[]> {
  const dirs = ['packages', 'services', 'infra', 'deploy']
    .flatMap((group) => readdirSync(join(root, group)).map((name) => join(group, name)))
    .concat('e2e')
    .filter((dir) => existsSync(join(root, dir, 'package.json')));
  const graph = new Map<string, string[]>();
  for (const dir of dirs) {
    const manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Record<
      string,
      Record<string, string> | string
    >;
    const needs = ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'].flatMap((field) =>
      Object.entries((manifest[field] ?? {}) as Record<string, string>)
        .filter(([, range]) => range.startsWith('workspace:'))
        .map(([name]) => name),
    );
    graph.set(manifest.name as string, [...new Set(needs)]);
  }
  return graph;
}

/** Every cycle in `graph`, each once, as the path from its first package back to it. */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const cycles = new Map<string, string>();
  const walk = (path: readonly string[]) => {
    for (const next of graph.get(path.at(-1)!) ?? []) {
      const at = path.indexOf(next);
      if (at >= 0) {
        const cycle = path.slice(at);
        const key = [...cycle].sort().join(' ');
        if (!cycles.has(key)) cycles.set(key, [...cycle, next].join(' → '));
      } else walk([...path, next]);
    }
  };
  for (const name of graph.keys()) walk([name]);
  return [...cycles.values()].sort();
}

describe('the workspace', () => {
  it('is a tree but for the test kit and the two packages whose tables it migrates', () => {
    expect(cyclesOf(workspaceGraph())).toEqual([
      '@idem/inbox → @idem/testkit → @idem/inbox',
      '@idem/inbox → @idem/testkit → @idem/outbox → @idem/inbox',
      '@idem/testkit → @idem/outbox → @idem/testkit',
    ]);
  });

  it('finds a cycle where there is one, at any length', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
    ]);
    expect(cyclesOf(graph)).toEqual(['a → b → c → a']);
    expect(cyclesOf(new Map([['a', ['a']]]))).toEqual(['a → a']);
  });
});
