/**
 * One Node.js version for the whole project: what developers install (.nvmrc), what the
 * packages declare (engines), the types the code is checked against, what the bundles target
 * and what the images run. The tests themselves run on it too.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PUBLISHED_PACKAGES } from '../../scripts/build-packages.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const manifest = JSON.parse(read('package.json')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};

describe('the Node.js version', () => {
  const major = read('.nvmrc').trim();

  it('is one major in .nvmrc, engines, @types/node, the bundle target and the image', () => {
    expect(major).toMatch(/^\d+$/);
    expect(manifest.engines.node).toMatch(new RegExp(`^\\^${major}\\.`));
    expect(manifest.devDependencies['@types/node']).toMatch(new RegExp(`^\\^${major}\\.`));
    expect(read('scripts/build.ts')).toContain('target: `node${NODE_MAJOR}`');
    expect(read('infra/Dockerfile')).toMatch(new RegExp(`^ARG NODE_IMAGE=node:${major}-slim$`, 'm'));
  });

  it('is one of those the published packages admit: every supported LTS their code runs on (22, 24 and 26)', () => {
    for (const name of PUBLISHED_PACKAGES) {
      const { engines } = JSON.parse(read(`packages/${name}/package.json`)) as { engines: { node: string } };
      expect(engines.node, name).toBe('^22.12.0 || ^24.11.0 || ^26.0.0');
    }
  });

  it('is the one the tests run on (so the production-build test runs the bundles on what the image has)', () => {
    expect(process.versions.node.split('.')[0]).toBe(major);
  });
});
