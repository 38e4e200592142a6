/**
 * Builds what the containers run: one ESM bundle per entrypoint (each service's main.ts and
 * migrate.ts, the Stripe simulator, the SMTP sink), the same entrypoints the native run starts
 * with tsx. Workspace packages are bundled from source; npm packages stay external and come
 * from `pnpm deploy` (instrumentation and Prisma's runtime need their real modules).
 */
import { build, type Plugin } from 'esbuild';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export const ENTRYPOINTS: Record<string, string[]> = {
  'services/orders': ['src/main.ts', 'src/migrate.ts'],
  'services/inventory': ['src/main.ts', 'src/migrate.ts'],
  'services/payments': ['src/main.ts', 'src/migrate.ts'],
  'services/notifications': ['src/main.ts', 'src/migrate.ts'],
  'infra/stripe-sim': ['src/main.ts'],
  'infra/smtp-sink': ['src/main.ts'],
};

const npmPackagesExternal: Plugin = {
  name: 'npm-packages-external',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@idem/') ? undefined : { path: args.path, external: true },
    );
  },
};

const only = process.argv[2];
for (const [dir, entries] of Object.entries(ENTRYPOINTS)) {
  if (only && dir !== only) continue;
  await build({
    entryPoints: entries.map((entry) => join(root, dir, entry)),
    outdir: join(root, dir, 'dist'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['development'],
    plugins: [npmPackagesExternal],
    sourcemap: true,
    logLevel: 'warning',
  });
  console.log(`built ${dir}/dist (${entries.join(', ')})`);
}
