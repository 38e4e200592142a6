/**
 * The versions a user of the packages reads: each CHANGELOG's releases come newest first, and a
 * Breaking entry comes with a new major version (a new minor one below 1.0, as semver's 0.x
 * convention has it); package-api.unit.spec.ts holds its first heading to package.json's version.
 * Every tarball a page tells to install, and every version an example asks for, is the package's
 * current one. `pnpm release --tag` (scripts/release.ts) dates the unreleased sections and tags them.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PUBLISHED_PACKAGES, versionOf } from '../../scripts/build-packages.js';
import { pendingReleases, release } from '../../scripts/release.js';
import { root } from './compose-file.js';

interface Release {
  readonly version: string;
  readonly breaking: boolean;
}

/** A CHANGELOG's releases, as written: each `## x.y.z` heading and whether its entries break. */
function releasesOf(changelog: string): Release[] {
  return changelog
    .split(/^## /m)
    .slice(1)
    .map((section) => ({ version: section.split('\n', 1)[0]!.trim(), breaking: /\*\*Breaking:?\*\*/.test(section) }));
}

const parts = (version: string) => version.split('.').map(Number) as [number, number, number];

/** What a release must bump over the one before it: 'major' for a breaking one (minor below 1.0). */
function bumpProblem(older: string, newer: Release): string | undefined {
  const [a, b, c] = parts(older);
  const [x, y, z] = parts(newer.version);
  if (!(x > a || (x === a && (y > b || (y === b && z > c))))) return `${newer.version} does not come after ${older}`;
  if (!newer.breaking) return undefined;
  const breaksAllowed = a === 0 ? x > 0 || y > b : x > a;
  return breaksAllowed ? undefined : `${newer.version} has a Breaking entry but keeps ${a === 0 ? `0.${b}` : `${a}`}`;
}

function problemsOf(name: (typeof PUBLISHED_PACKAGES)[number]): string[] {
  const releases = releasesOf(readFileSync(join(root, 'packages', name, 'CHANGELOG.md'), 'utf8'));
  const problems: string[] = [];
  for (let i = 0; i + 1 < releases.length; i++) {
    const problem = bumpProblem(releases[i + 1]!.version, releases[i]!);
    if (problem) problems.push(problem);
  }
  return problems.map((problem) => `@idem/${name}: ${problem}`);
}

/** Every Markdown file a user reads: the README, docs/, each package's and example's README. */
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  ...PUBLISHED_PACKAGES.map((name) => `packages/${name}/README.md`),
  ...readdirSync(join(root, 'examples')).map((name) => `examples/${name}/README.md`),
].filter((page) => existsSync(join(root, page)));

describe('the releases of the published packages', () => {
  it('come newest first in each CHANGELOG; a Breaking entry comes with a new major (0.x: minor)', () => {
    expect(PUBLISHED_PACKAGES.flatMap(problemsOf)).toEqual([]);
  });

  it('catch a version that does not move and a break that keeps its minor', () => {
    expect(bumpProblem('0.1.0', { version: '0.1.0', breaking: false })).toMatch(/does not come after/);
    expect(bumpProblem('0.1.0', { version: '0.1.1', breaking: true })).toMatch(/keeps 0.1/);
    expect(bumpProblem('1.4.2', { version: '1.5.0', breaking: true })).toMatch(/keeps 1/);
    expect(bumpProblem('0.1.0', { version: '0.2.0', breaking: true })).toBeUndefined();
    expect(bumpProblem('1.4.2', { version: '2.0.0', breaking: true })).toBeUndefined();
    expect(releasesOf('# c\n\n## 0.2.0\n\n- **Breaking:** x\n\n## 0.1.0\n\nfirst\n')).toEqual([
      { version: '0.2.0', breaking: true },
      { version: '0.1.0', breaking: false },
    ]);
  });

  it('are named at their current version wherever a page says to install a tarball or shows a manifest, and in every example', () => {
    const stale: string[] = [];
    for (const page of pages)
      for (const [, name, version] of readFileSync(join(root, page), 'utf8').matchAll(
        /idem-([a-z]+)-(\d+\.\d+\.\d+)\.tgz/g,
      ))
        if (version !== versionOf(name as (typeof PUBLISHED_PACKAGES)[number]))
          stale.push(`${page}: idem-${name}-${version}`);
    // A manifest a page shows, e.g. docs/lifting-out.md's: "@idem/database": "0.2.0".
    for (const page of pages)
      for (const [, name, version] of readFileSync(join(root, page), 'utf8').matchAll(
        /"@idem\/([a-z]+)": "(\d+\.\d+\.\d+)"/g,
      ))
        if (version !== versionOf(name as (typeof PUBLISHED_PACKAGES)[number]))
          stale.push(`${page}: @idem/${name} ${version}`);
    for (const example of readdirSync(join(root, 'examples'))) {
      const { dependencies } = JSON.parse(readFileSync(join(root, 'examples', example, 'package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
      };
      // Each names the tarball of this checkout's version (examples.unit.spec.ts: never a registry's).
      for (const [dependency, spec] of Object.entries(dependencies)) {
        const name = dependency.slice(6) as (typeof PUBLISHED_PACKAGES)[number];
        if (dependency.startsWith('@idem/') && spec !== `file:../idem-packs/idem-${name}-${versionOf(name)}.tgz`)
          stale.push(`examples/${example}: ${dependency} ${spec}`);
      }
    }
    expect(stale).toEqual([]);
  });

  it('each say, under their newest heading, whether it is released: "Unreleased", or "Released <date>"', () => {
    for (const name of PUBLISHED_PACKAGES) {
      const newest = readFileSync(join(root, 'packages', name, 'CHANGELOG.md'), 'utf8').split(/^## /m)[1]!;
      expect(newest.split('\n')[2], `@idem/${name}`).toMatch(/^(Unreleased|Released \d{4}-\d{2}-\d{2})\b/);
    }
  });

  it('are cut by `pnpm release --tag`: each unreleased section dated, one commit, a tag per package; then nothing', () => {
    const clone = mkdtempSync(join(tmpdir(), 'idem-release-'));
    const git = (...args: string[]) => execFileSync('git', args, { cwd: clone, encoding: 'utf8' }).trim();
    try {
      execFileSync('git', ['clone', '--quiet', root, clone]);
      git('config', 'user.email', 'release@example.invalid');
      git('config', 'user.name', 'release test');
      const unreleased = pendingReleases(clone).filter((p) => p.unreleased);
      const released = release(clone, '2026-12-06');
      expect(released.map((p) => p.tag)).toEqual(unreleased.map((p) => p.tag));
      for (const { name, tag } of released) {
        expect(readFileSync(join(clone, 'packages', name, 'CHANGELOG.md'), 'utf8')).toMatch(
          /^## \S+\n\nReleased 2026-12-06/m,
        );
        expect(git('rev-list', '-n', '1', tag)).toBe(git('rev-parse', 'HEAD'));
      }
      expect(git('log', '-1', '--format=%s')).toBe(`release: ${released.map((p) => p.tag).join(', ')}`);
      expect(pendingReleases(clone).every((p) => !p.unreleased)).toBe(true);
      expect(release(clone)).toEqual([]);
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  });
});
