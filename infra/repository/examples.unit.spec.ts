/**
 * The examples are projects outside the workspace, on the packed packages. The `@idem` scope is
 * this repository's on no registry: a name there would install whatever someone else published
 * under it. So every `@idem/*` an example names — its own dependencies, and through the overrides
 * those of the packages it installs — is a tarball packed from this checkout, never a version.
 * published-packages.int.spec.ts installs them with npm against a registry that answers nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PUBLISHED_PACKAGES, tarballOf } from '../../scripts/build-packages.js';
import { read, root } from './compose-file.js';

/** Where an example finds the tarballs: `pnpm pack --pack-destination` of docs/packages.md "Use the packages in your own service". */
const EXAMPLE_PACKS = 'examples/idem-packs';

interface Manifest {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  /** npm's. */
  overrides?: Record<string, string>;
  pnpm?: { overrides?: Record<string, string> };
}

const examples = readdirSync(join(root, 'examples'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && entry.name.startsWith('outside-'))
  .map((entry) => ({
    name: entry.name,
    manifest: JSON.parse(readFileSync(join(root, 'examples', entry.name, 'package.json'), 'utf8')) as Manifest,
  }));

/** The tarball an example names for a package, relative to the example. */
const local = (name: (typeof PUBLISHED_PACKAGES)[number]) => `file:../idem-packs/${tarballOf(name)}`;

/** Every `@idem/*` an example names, with where: `<field> <name> <spec>`. */
function idemSpecs(manifest: Manifest): { where: string; name: string; spec: string }[] {
  const fields = {
    dependencies: manifest.dependencies,
    devDependencies: manifest.devDependencies,
    optionalDependencies: manifest.optionalDependencies,
    peerDependencies: manifest.peerDependencies,
    overrides: manifest.overrides,
    'pnpm.overrides': manifest.pnpm?.overrides,
  };
  return Object.entries(fields).flatMap(([field, specs]) =>
    Object.entries(specs ?? {})
      .filter(([name]) => name.startsWith('@idem/'))
      .map(([name, spec]) => ({ where: `${field} ${name}`, name, spec })),
  );
}

describe('the examples', () => {
  it('are there to check', () => {
    expect(examples.map((e) => e.name).sort()).toEqual(['outside-consumer', 'outside-producer']);
  });

  it.each(examples)(
    '$name takes every @idem package from a tarball of this checkout, never from a registry',
    ({ manifest }) => {
      const specs = idemSpecs(manifest);
      expect(specs.length).toBeGreaterThan(0);
      const expected = (name: string) =>
        PUBLISHED_PACKAGES.includes(name.slice('@idem/'.length) as never)
          ? local(name.slice('@idem/'.length) as (typeof PUBLISHED_PACKAGES)[number])
          : `(not a published package: ${name})`;
      expect(specs.filter(({ name, spec }) => spec !== expected(name)).map((s) => `${s.where} ${s.spec}`)).toEqual([]);
      // The packages depend on each other by version: npm and pnpm each override every one of
      // them, so a package the example only installs through another comes from its tarball too.
      const every = Object.fromEntries(PUBLISHED_PACKAGES.map((name) => [`@idem/${name}`, local(name)]));
      expect(manifest.overrides).toMatchObject(every);
      expect(manifest.pnpm?.overrides).toMatchObject(every);
    },
  );

  it('keep the tarballs they are installed from out of git', () => {
    expect(read('.gitignore').split('\n')).toContain(`${EXAMPLE_PACKS}/`);
  });
});
