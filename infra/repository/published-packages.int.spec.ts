/**
 * The packages leave the repository: build them, `pnpm pack` each, install the tarballs into a
 * copy of examples/outside-consumer in a temporary folder outside the workspace (its own
 * package.json, Prisma schema and migrations), generate its Prisma client with the inbox's
 * models, typecheck it against the packages' declarations, and run its consumer against the
 * real PostgreSQL and Redis: one message processed, the same message again a duplicate, one
 * business effect.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dropDatabase } from '@idem/database';
import { deleteQueues, pnpm, postgresServerUrl, uniqueName } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage, PUBLISHED_PACKAGES } from '../../scripts/build-packages.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'idem-outside-'));
const tarballs = join(work, 'tarballs');
const project = join(work, 'project');
const databaseUrl = `${postgresServerUrl}/${uniqueName('idem_test_outside')}`;
const prefix = uniqueName('idem_test_outside');

/** The manifest as published: `workspace:` ranges replaced, exports pointing at dist/ only. */
function packedManifest(name: string): { exports: unknown; dependencies?: Record<string, string> } {
  const tarball = join(tarballs, `idem-${name}-0.1.0.tgz`);
  return JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
}

beforeAll(() => {
  for (const name of PUBLISHED_PACKAGES) {
    buildPackage(name);
    pnpm(join(root, 'packages', name), ['pack', '--pack-destination', tarballs]);
  }
  cpSync(join(root, 'examples/outside-consumer'), project, {
    recursive: true,
    filter: (source) => !/node_modules|generated|idem-packages\.prisma/.test(source),
  });
  // The example names the packages by version; here they come from the tarballs just packed.
  const manifestPath = join(project, 'package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { dependencies: Record<string, string> };
  const local = Object.fromEntries(
    PUBLISHED_PACKAGES.map((name) => [`@idem/${name}`, `file:${tarballs}/idem-${name}-0.1.0.tgz`]),
  );
  for (const name of Object.keys(manifest.dependencies)) {
    if (name in local) manifest.dependencies[name] = local[name]!;
  }
  writeFileSync(manifestPath, JSON.stringify({ ...manifest, pnpm: { overrides: local } }, null, 2));
  pnpm(project, ['install', '--prefer-offline']);
});

afterAll(async () => {
  await dropDatabase(databaseUrl);
  await deleteQueues(prefix);
  rmSync(work, { recursive: true, force: true });
});

describe('the packages, installed outside the workspace', () => {
  it('publish their built ES modules and declarations only, with versions for their own dependencies', () => {
    expect(readdirSync(tarballs).sort()).toEqual(PUBLISHED_PACKAGES.map((name) => `idem-${name}-0.1.0.tgz`).sort());
    for (const name of PUBLISHED_PACKAGES) {
      const manifest = packedManifest(name);
      expect(manifest.exports).toEqual({ '.': { types: './dist/index.d.ts', default: './dist/index.js' } });
      for (const range of Object.values(manifest.dependencies ?? {})) expect(range).not.toMatch(/^workspace:/);
      const files = execFileSync('tar', ['-tzf', join(tarballs, `idem-${name}-0.1.0.tgz`)], { encoding: 'utf8' });
      expect(files).toContain('package/LICENSE');
      expect(files).toContain('package/README.md');
      expect(files).toContain('package/dist/index.d.ts');
      expect(files).not.toMatch(/\.spec\.|package\/src\//);
    }
  });

  it("show the example project's code in their READMEs", () => {
    const example = readFileSync(join(root, 'examples/outside-consumer/src/main.ts'), 'utf8');
    expect(readFileSync(join(root, 'packages/messaging/README.md'), 'utf8')).toContain(example);
  });

  it('generate a Prisma client with the inbox models and typecheck against the declarations', () => {
    // Prisma checks that a schema engine exists before generating, though generating never runs
    // it; offline there is none to download (scripts/prisma-generate.ts does the same).
    const placeholder = join(work, 'schema-engine-placeholder');
    writeFileSync(placeholder, '');
    pnpm(project, ['run', 'generate'], { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: placeholder });
    expect(readFileSync(join(project, 'prisma/idem-packages.prisma'), 'utf8')).toContain('model ProcessedMessage');
    pnpm(project, ['run', 'typecheck']);
  });

  it('run a consumer: a message processed, the same message again a duplicate, one business effect', async () => {
    const output = pnpm(project, ['--silent', 'start'], {
      ...process.env,
      DATABASE_URL: databaseUrl,
      QUEUE_PREFIX: prefix,
    });
    const result = JSON.parse(output.trim().split('\n').at(-1)!) as { outcomes: string[]; reservations: number };
    expect(result).toEqual({ outcomes: ['processed', 'duplicate'], reservations: 1 });

    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ consumer: string }>('SELECT consumer FROM processed_messages');
      expect(rows).toEqual([{ consumer: 'inventory.order-placed.v1' }]);
    } finally {
      await client.end();
    }
  });
});
