/**
 * Builds the packages a service outside this repository installs (`pnpm build:packages`): each
 * one's src/ (tests left out) to dist/ as ES modules with declarations, and the repository's
 * LICENSE beside it, ready for `pnpm pack`. Inside the workspace nothing reads dist/: the
 * `development` condition of each package's exports points at its sources.
 *
 * A package is compiled after the packages it imports, without the `development` condition, so
 * an import of another @idem package resolves to that package's built declarations — exactly
 * what an installer of the tarballs gets.
 */
import { copyFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The installable packages, each after the ones it depends on. */
export const PUBLISHED_PACKAGES = [
  'contracts',
  'faults',
  'database',
  'inbox',
  'transport',
  'outbox',
  'messaging',
  'rabbitmq',
  'service',
  'testing',
] as const;

type PublishedPackage = (typeof PUBLISHED_PACKAGES)[number];

/** A package's version, as its package.json (and the first heading of its CHANGELOG) says; `dir`: another checkout's. */
export const versionOf = (name: PublishedPackage, dir = root): string =>
  (JSON.parse(readFileSync(join(dir, 'packages', name, 'package.json'), 'utf8')) as { version: string }).version;

/** The file `pnpm pack` makes of a package. */
export const tarballOf = (name: PublishedPackage) => `idem-${name}-${versionOf(name)}.tgz`;

/** Where a package is built: its dist/, or `<into>/<name>` when a build goes elsewhere. */
const outOf = (name: PublishedPackage, into?: string) =>
  into ? join(into, name) : join(root, 'packages', name, 'dist');

function compilerOptions(dir: string, into: string | undefined, outDir: string): ts.CompilerOptions {
  const { config, error } = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
  return {
    ...options,
    noEmit: false,
    declaration: true,
    customConditions: [],
    rootDir: join(dir, 'src'),
    outDir,
    // Another @idem package is its built declarations, as an installer gets them.
    paths: Object.fromEntries(
      PUBLISHED_PACKAGES.map((name) => [`@idem/${name}`, [join(outOf(name, into), 'index.d.ts')]]),
    ),
  };
}

function sourcesOf(dir: string): string[] {
  return readdirSync(join(dir, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.spec.ts'))
    .map((file) => join(dir, 'src', file));
}

/**
 * Builds one package, after the ones it depends on: the ES modules and declarations it ships, into
 * its dist/, or into `<into>/<name>` (a check that must not touch dist/).
 */
export function buildPackage(name: PublishedPackage, into?: string): void {
  const dir = join(root, 'packages', name);
  const out = outOf(name, into);
  rmSync(out, { recursive: true, force: true });
  const program = ts.createProgram(sourcesOf(dir), compilerOptions(dir, into, out));
  const { diagnostics } = program.emit();
  const errors = [...ts.getPreEmitDiagnostics(program), ...diagnostics];
  if (errors.length > 0) {
    const host = { getCanonicalFileName: (f: string) => f, getCurrentDirectory: () => root, getNewLine: () => '\n' };
    throw new Error(`@idem/${name} did not build:\n${ts.formatDiagnostics(errors, host)}`);
  }
  if (!into) copyFileSync(join(root, 'LICENSE'), join(dir, 'LICENSE'));
}

// Builds when run; importing PUBLISHED_PACKAGES builds nothing.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const name of PUBLISHED_PACKAGES) {
    buildPackage(name);
    console.log(`built packages/${name}/dist`);
  }
}
