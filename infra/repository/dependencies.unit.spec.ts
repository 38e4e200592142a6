/**
 * The libraries the workspace keeps: one version of each across every package (Prisma's CLI,
 * client and adapter on one release), and nothing .gitignore leaves out — build output, logs,
 * `.env`, the operator token `pnpm start` keeps in `.idem/` — sent into an image's build context.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './compose-file.js';

const manifests = [
  '.',
  ...['packages', 'services', 'infra', 'deploy', 'examples'].flatMap((group) =>
    readdirSync(join(root, group)).map((name) => join(group, name)),
  ),
  'e2e',
]
  .filter((dir) => existsSync(join(root, dir, 'package.json')))
  .map((dir) => ({
    dir,
    manifest: JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Record<
      string,
      Record<string, string>
    >,
  }));

/**
 * Each dependency with the versions the workspace asks for it, where there is more than one; a
 * published package's peer range (`^8.23.1`) asks for the version it starts at.
 */
function versionsThatDisagree(): Record<string, string[]> {
  const versions = new Map<string, Set<string>>();
  for (const { manifest } of manifests)
    for (const field of ['dependencies', 'devDependencies', 'peerDependencies'])
      for (const [name, range] of Object.entries(manifest[field] ?? {})) {
        const version = field === 'peerDependencies' ? range.replace(/^\^/, '') : range;
        if (!range.startsWith('workspace:')) versions.set(name, (versions.get(name) ?? new Set()).add(version));
      }
  return Object.fromEntries(
    [...versions].filter(([, set]) => set.size > 1).map(([name, set]) => [name, [...set].sort()]),
  );
}

/** The entries of an ignore file, as patterns a build context matches (a bare name matches at any depth). */
const patterns = (file: string) =>
  readFileSync(join(root, file), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.replace(/\/$/, ''))
    .map((line) => (line.includes('/') ? line : `**/${line}`));

describe('the libraries the workspace keeps', () => {
  it('are asked for in one version each, across every package', () => {
    expect(versionsThatDisagree()).toEqual({});
  });

  it("put Prisma's CLI, client and driver adapter on one release", () => {
    const prisma = new Set(
      manifests.flatMap(({ manifest }) =>
        ['dependencies', 'devDependencies'].flatMap((field) =>
          Object.entries(manifest[field] ?? {})
            .filter(([name]) => name === 'prisma' || ['@prisma/client', '@prisma/adapter-pg'].includes(name))
            .map(([, version]) => version),
        ),
      ),
    );
    expect([...prisma]).toHaveLength(1);
  });

  it('send an image build nothing that .gitignore leaves out', () => {
    const docker = new Set(patterns('.dockerignore'));
    expect(patterns('.gitignore').filter((pattern) => !docker.has(pattern))).toEqual([]);
  });
});
