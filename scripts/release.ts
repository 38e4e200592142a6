/**
 * Releases the published packages, as changesets' `version` and `tag` do, with the CHANGELOGs the
 * repository already keeps as the changesets: each package's newest section is its next version
 * (package-api.unit.spec holds it to package.json; releases.unit.spec to semver, a Breaking entry
 * with a new minor below 1.0), marked "Unreleased" until it is released.
 *
 *   pnpm release           what each package would release, and what it already has
 *   pnpm release --tag     releases every unreleased section: "Unreleased" becomes "Released <date>",
 *                          one commit, and a tag `@idem/<name>@<version>` per package at it
 *
 * Pack and publish from a tag (`git checkout @idem/inbox@0.2.0`, `pnpm build:packages`, `pnpm pack`).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PUBLISHED_PACKAGES, versionOf } from './build-packages.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();

/** A package's next release: its version, and whether its CHANGELOG still says it is unreleased. */
export interface PendingRelease {
  readonly name: string;
  readonly version: string;
  readonly tag: string;
  readonly unreleased: boolean;
  readonly tagged: boolean;
}

const changelogOf = (dir: string, name: string) => join(dir, 'packages', name, 'CHANGELOG.md');

/** The newest section's first paragraph (what comes before the first heading, the heading), where "Unreleased" is written until the release. */
const UNRELEASED = /^((?:(?!\n## )[\s\S])*\n## \S+\n\n)Unreleased/;

/** What each published package of the repository at `dir` would release. */
export function pendingReleases(dir: string = root): PendingRelease[] {
  const tags = new Set(git(dir, 'tag', '--list', '@idem/*').split('\n'));
  return PUBLISHED_PACKAGES.map((name) => {
    const version = versionOf(name, dir);
    const tag = `@idem/${name}@${version}`;
    const unreleased = UNRELEASED.test(readFileSync(changelogOf(dir, name), 'utf8'));
    return { name, version, tag, unreleased, tagged: tags.has(tag) };
  });
}

/**
 * Releases every package whose newest section is unreleased: dates it, commits, tags. Refuses a
 * tree with uncommitted changes (the tag would not say what was released) and a version already
 * tagged (a release that did not bump its version).
 */
export function release(dir: string = root, date = new Date().toISOString().slice(0, 10)): PendingRelease[] {
  if (git(dir, 'status', '--porcelain') !== '') throw new Error('release: commit or stash your changes first');
  const releasing = pendingReleases(dir).filter((pending) => pending.unreleased);
  const retagged = releasing.filter((pending) => pending.tagged);
  if (retagged.length > 0)
    throw new Error(`release: already tagged, bump the version first: ${retagged.map((p) => p.tag).join(', ')}`);
  if (releasing.length === 0) return [];
  for (const { name } of releasing) {
    const file = changelogOf(dir, name);
    writeFileSync(file, readFileSync(file, 'utf8').replace(UNRELEASED, `$1Released ${date}`));
  }
  git(dir, 'add', ...releasing.map(({ name }) => changelogOf(dir, name)));
  git(dir, 'commit', '--quiet', '-m', `release: ${releasing.map((p) => p.tag).join(', ')}`);
  for (const { tag } of releasing) git(dir, 'tag', '--annotate', tag, '--message', tag);
  return releasing;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--tag')) {
    const released = release();
    console.log(released.length ? `released ${released.map((p) => p.tag).join(', ')}` : 'nothing to release');
  } else {
    for (const p of pendingReleases())
      console.log(`${p.tag.padEnd(28)} ${p.unreleased ? 'unreleased' : 'released'}${p.tagged ? ', tagged' : ''}`);
  }
}
