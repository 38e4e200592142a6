/**
 * Builds what the containers run: one ESM bundle per entrypoint (each service's main.ts and
 * migrate.ts and the instrumentation entry it is started with, the Stripe simulator, the SMTP
 * sink), the same entrypoints the native run starts with tsx. Workspace packages are bundled
 * from source; npm packages stay external and come from `pnpm deploy` (instrumentation and
 * Prisma's runtime need their real modules). Beside the bundles, `dist/npm-imports.json` names
 * what each one imports from npm packages: the image keeps those and what they depend on, nothing
 * else (scripts/prune-deploy.ts).
 */
import { SERVICE_NAMES } from '@idem/shop';
import { build, type Plugin } from 'esbuild';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The project's one Node.js major (.nvmrc): the bundles target what the image runs. */
const NODE_MAJOR = readFileSync(join(root, '.nvmrc'), 'utf8').trim();

/** The instrumentation entry every service process is started with (`node --import`). */
const INSTRUMENTATION = 'packages/observability/src/instrumentation.ts';
const service = { main: 'src/main.ts', migrate: 'src/migrate.ts', instrumentation: `../../${INSTRUMENTATION}` };

/**
 * Files a package's bundles read at run time, copied beside them (source → destination, relative
 * to the root and the package). The packages' tables (`TableSet`) are found at `../tables/<set>`
 * from the code that names them, so from a bundle in dist/ at `tables/` beside it: every service's
 * migrator applies them. The lessons make their databases with the test kit's migrations, which it
 * finds at `../prisma` from the bundle.
 */
const PACKAGE_TABLES = { 'packages/inbox/tables': 'tables', 'packages/outbox/tables': 'tables' };
export const ASSETS: Record<string, Record<string, string>> = {
  ...Object.fromEntries(SERVICE_NAMES.map((name) => [`services/${name}`, PACKAGE_TABLES])),
  'infra/console': { ...PACKAGE_TABLES, 'packages/testkit/prisma/migrations': 'prisma/migrations' },
};

/** Per package: the bundles it gets in its dist/ (name → source, relative to the package). */
export const ENTRYPOINTS: Record<string, Record<string, string>> = {
  ...Object.fromEntries(SERVICE_NAMES.map((name) => [`services/${name}`, service])),
  // The console runs the lessons: their consumer process is a bundle of its own beside main.js.
  'infra/console': {
    main: 'src/main.ts',
    seed: 'src/seed.ts',
    instrumentation: `../../${INSTRUMENTATION}`,
    'lesson-consumer': '../lessons/src/consumer-process.ts',
  },
  'infra/stripe-sim': { main: 'src/main.ts' },
  'infra/smtp-sink': { main: 'src/main.ts' },
};

const npmPackagesExternal: Plugin = {
  name: 'npm-packages-external',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@idem/') ? undefined : { path: args.path, external: true },
    );
  },
};

/**
 * A generated Prisma client imports its query compiler as base64 text (`…wasm-base64.mjs`), and a
 * process keeps that module's source and the string it exports, ~2.3 MB each, for its whole life.
 * In a bundle the compiler is read from a `.wasm` file written beside it, compiled, and its bytes
 * let go. The build fails if a Prisma release generates that code differently.
 */
const PRISMA_BASE64_COMPILER =
  /const \{ wasm \} = await import\("(@prisma\/client\/runtime\/([\w.]+))\.wasm-base64\.mjs"\)\s*return await decodeBase64AsWasm\(wasm\)/;

const prismaCompilerFromFile: Plugin = {
  name: 'prisma-compiler-from-file',
  setup(build) {
    const compilers = new Map<string, Buffer>(); // file name → the compiler, written with the bundle
    build.onStart(() => compilers.clear());
    build.onLoad({ filter: /[\\/]generated[\\/]prisma[\\/]internal[\\/]class\.ts$/ }, async (args) => {
      const source = readFileSync(args.path, 'utf8');
      const found = PRISMA_BASE64_COMPILER.exec(source);
      if (!found) throw new Error(`${args.path}: no base64 query compiler where scripts/build.ts expects it`);
      const [code, module, name] = found as unknown as [string, string, string];
      const base64 = createRequire(args.path).resolve(`${module}.wasm-base64.mjs`);
      const { wasm } = (await import(pathToFileURL(base64).href)) as { wasm: string };
      compilers.set(`${name}.wasm`, Buffer.from(wasm, 'base64'));
      const fromFile = `const { readFile } = await import('node:fs/promises')
    return new WebAssembly.Module(await readFile(new URL('./${name}.wasm', import.meta.url)))`;
      return { contents: source.replace(code, fromFile), loader: 'ts' };
    });
    build.onEnd(({ errors }) => {
      if (errors.length > 0) return;
      const outdir = build.initialOptions.outdir!;
      mkdirSync(outdir, { recursive: true }); // on-end may run before esbuild writes the bundle
      for (const [file, wasm] of compilers) writeFileSync(join(outdir, file), wasm);
    });
  },
};

// Builds when run (`pnpm build`); importing ENTRYPOINTS builds nothing.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const only = process.argv[2];
  for (const [dir, entries] of Object.entries(ENTRYPOINTS)) {
    if (only && dir !== only) continue;
    const { metafile } = await build({
      entryPoints: Object.fromEntries(Object.entries(entries).map(([name, entry]) => [name, join(root, dir, entry)])),
      outdir: join(root, dir, 'dist'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: `node${NODE_MAJOR}`,
      conditions: ['development'],
      plugins: [npmPackagesExternal, prismaCompilerFromFile],
      sourcemap: true,
      metafile: true,
      logLevel: 'warning',
    });
    const npmImports = Object.fromEntries(
      Object.entries(metafile.outputs)
        .filter(([, output]) => output.entryPoint)
        .map(([file, output]) => [
          file.replace(/^.*\//, '').replace(/\.js$/, ''),
          [...new Set(output.imports.filter((i) => i.external && !isBuiltin(i.path)).map((i) => i.path))].sort(),
        ]),
    );
    writeFileSync(join(root, dir, 'dist/npm-imports.json'), `${JSON.stringify(npmImports, null, 2)}\n`);
    for (const [source, destination] of Object.entries(ASSETS[dir] ?? {}))
      cpSync(join(root, source), join(root, dir, destination), { recursive: true });
    console.log(`built ${dir}/dist (${Object.keys(entries).join(', ')})`);
  }
}
