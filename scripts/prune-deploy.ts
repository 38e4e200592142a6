/**
 * Shrinks a `pnpm deploy` to what its bundles run: the npm packages they import (each
 * `dist/npm-imports.json`, written by scripts/build.ts) and, transitively, what those packages
 * depend on — `dependencies`, installed `optionalDependencies` and required peers. Everything
 * else goes: optional peers (`@prisma/client`'s `prisma` CLI and TypeScript, which `pnpm deploy`
 * installs and nothing runs), type-only packages, `.bin`, and the query compilers Prisma ships
 * for the databases the generated clients do not use. A package a bundle imports that the
 * deploy lacks fails the build here rather than the container at start.
 *
 *   tsx scripts/prune-deploy.ts <deploy dir> <entry>[,<entry>…] [<dist dir>…]
 *
 * `<entry>` names the bundles the image starts (`main,instrumentation`; the migrator: `migrate`);
 * the dist dirs default to `<deploy dir>/dist`.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

interface Manifest {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** `@scope/name/sub/path` → `@scope/name`; `name/sub` → `name`. */
export const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

/** Node's lookup: `node_modules/<name>` in the importing package's folder, then each parent's. */
function locate(name: string, from: string, root: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dir === root || dir === dirname(dir)) return undefined;
  }
}

/** Every package folder the imports reach, following what each package.json says it needs. */
export function runtimeClosure(root: string, imports: readonly string[]): Set<string> {
  const kept = new Set<string>();
  const visit = (name: string, from: string, required: boolean) => {
    if (name.startsWith('@types/')) return;
    const dir = locate(name, from, root);
    if (!dir) {
      if (required) throw new Error(`${name} (needed from ${from}) is not in the deploy`);
      return;
    }
    if (kept.has(dir)) return;
    kept.add(dir);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
    for (const dependency of Object.keys(manifest.dependencies ?? {})) visit(dependency, dir, true);
    for (const dependency of Object.keys(manifest.optionalDependencies ?? {})) visit(dependency, dir, false);
    for (const peer of Object.keys(manifest.peerDependencies ?? {})) {
      if (!manifest.peerDependenciesMeta?.[peer]?.optional) visit(peer, dir, true);
    }
  };
  for (const name of imports) visit(name, root, true);
  return kept;
}

/** Removes every package under `node_modules` (nested ones too) that is not in `kept`. */
export function prune(nodeModules: string, kept: Set<string>): void {
  if (!existsSync(nodeModules)) return;
  for (const entry of readdirSync(nodeModules)) {
    const path = join(nodeModules, entry);
    if (entry.startsWith('@')) {
      prune(path, kept);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
    } else if (entry === '.bin' || (!entry.startsWith('.') && !kept.has(realpathSync(path)))) {
      rmSync(path, { recursive: true, force: true });
    } else if (!entry.startsWith('.')) {
      prune(join(path, 'node_modules'), kept);
    }
  }
}

/**
 * `@prisma/client/runtime` holds a query compiler per database (~9 MB each, five databases, two
 * sizes); a generated client imports the one for its own. Keeps the ones the bundles import.
 */
export function pruneQueryCompilers(root: string, imports: readonly string[]): void {
  const runtime = join(root, 'node_modules/@prisma/client/runtime');
  if (!existsSync(runtime)) return;
  const used = imports
    .filter((i) => i.startsWith('@prisma/client/runtime/query_compiler_'))
    .map((i) => i.split('/').pop()!);
  for (const file of readdirSync(runtime)) {
    if (file.startsWith('query_compiler_') && !used.some((name) => file.startsWith(name))) rmSync(join(runtime, file));
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const [deploy, entries, ...dists] = process.argv.slice(2);
  if (!deploy || !entries) throw new Error('usage: prune-deploy.ts <deploy dir> <entry>[,<entry>…] [<dist dir>…]');
  const root = realpathSync(deploy);
  const imports = (dists.length > 0 ? dists : [join(root, 'dist')]).flatMap((dist) => {
    const byEntry = JSON.parse(readFileSync(join(dist, 'npm-imports.json'), 'utf8')) as Record<string, string[]>;
    return entries.split(',').flatMap((entry) => byEntry[entry] ?? []);
  });
  const kept = runtimeClosure(root, [...new Set(imports.map(packageOf))]);
  prune(join(root, 'node_modules'), kept);
  pruneQueryCompilers(root, imports);
  console.log(`prune-deploy: kept ${kept.size} packages for ${entries} in ${deploy}`);
}
