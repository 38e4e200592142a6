/**
 * What a stranger depends on when they install a published package: every export of its one door
 * (src/index.ts) says what it is (TSDoc); the declarations it ships are the committed API report
 * (scripts/api-reports.ts), so an API change shows up in review; it depends on exactly the
 * packages its built code imports, taking as peers the ones a process must hold one copy of;
 * and it keeps a CHANGELOG that its version is in.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiReport, filesOf, reportPath, withBuiltPackages } from '../../scripts/api-reports.js';
import { PUBLISHED_PACKAGES } from '../../scripts/build-packages.js';
import { root } from './compose-file.js';

/**
 * What a package shares with its caller, one copy per process: the caller's connections and
 * clients (a node-postgres pool, a BullMQ queue, an ioredis client, amqplib) and OpenTelemetry's API,
 * which its authors ask libraries to take as a peer. A peer with a caret range; pinned for the
 * package's own tests.
 */
const SHARED = new Set(['amqplib', 'bullmq', 'ioredis', 'pg', '@opentelemetry/api']);

interface Manifest {
  version: string;
  files: string[];
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  devDependencies?: Record<string, string>;
  types?: string;
  typings?: string;
  exports?: unknown;
}

const manifestOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;

/** The packages a built file imports (`pg`, `@idem/database`), Node's own modules aside; `dynamic` for `import()`. */
function importedPackages(code: string, { dynamic }: { dynamic: boolean }): string[] {
  const pattern = dynamic ? /import\s*\(\s*['"]([^'"]+)['"]/g : /(?:\bfrom\s+|^import\s+)['"]([^'"]+)['"]/gm;
  return [...code.matchAll(pattern)]
    .map((match) => match[1]!)
    .filter((specifier) => !specifier.startsWith('.') && !specifier.startsWith('node:'))
    .map((specifier) =>
      specifier
        .split('/')
        .slice(0, specifier.startsWith('@') ? 2 : 1)
        .join('/'),
    );
}

/**
 * What a build needs from an installer: `dependencies`, the packages its modules import and the
 * typed ones its declarations name; optional `peers`, what only some callers load (`import()`)
 * and the type packages of untyped ones its declarations name (`@types/pg` for a node-postgres user).
 */
function neededDependencies(name: string, built: string): { dependencies: string[]; peers: string[] } {
  const importsOf = (suffix: string, dynamic = false) =>
    new Set(
      filesOf(built, suffix).flatMap((file) => importedPackages(readFileSync(join(built, file), 'utf8'), { dynamic })),
    );
  const shipsTypes = (dependency: string) => {
    const manifest = manifestOf(join(root, 'packages', name, 'node_modules', dependency));
    return Boolean(manifest.types ?? manifest.typings) || JSON.stringify(manifest.exports ?? {}).includes('types');
  };
  const declared = [...importsOf('.d.ts')];
  const sorted = (names: Iterable<string>) => [...new Set(names)].sort();
  return {
    dependencies: sorted([...importsOf('.js'), ...declared.filter(shipsTypes)]),
    peers: sorted([
      ...importsOf('.js', true),
      ...declared.filter((dependency) => !shipsTypes(dependency)).map((dependency) => `@types/${dependency}`),
    ]),
  };
}

/** The exports of `index` (a package's src/index.ts) that carry no TSDoc comment: `name (file)`. */
function undocumentedExports(index: string): string[] {
  const program = ts.createProgram([index], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    customConditions: ['development'],
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(index)!)!;
  return checker.getExportsOfModule(module).flatMap((exported) => {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const documented = (symbol.declarations ?? []).some((declaration) => {
      // A variable's comment sits on its statement (`/** … */ export const x = …`).
      const node = ts.isVariableDeclaration(declaration) ? declaration.parent.parent : declaration;
      return ts.getJSDocCommentsAndTags(node).length > 0;
    });
    if (documented) return [];
    const file = symbol.declarations?.[0]?.getSourceFile().fileName.replace(`${root}/`, '') ?? '?';
    return [`${exported.name} (${file})`];
  });
}

const built = new Map<string, { report: string; needs: ReturnType<typeof neededDependencies> }>();

beforeAll(() =>
  withBuiltPackages((builtAt) => {
    for (const name of PUBLISHED_PACKAGES) {
      built.set(name, { report: apiReport(name, builtAt(name)), needs: neededDependencies(name, builtAt(name)) });
    }
  }),
);

describe('the published packages', () => {
  it('say what every export of their one door is, in TSDoc', () => {
    const missing = PUBLISHED_PACKAGES.flatMap((name) =>
      undocumentedExports(join(root, 'packages', name, 'src/index.ts')).map((entry) => `@idem/${name}: ${entry}`),
    );
    expect(missing).toEqual([]);
  });

  it('declare what their committed API report says (`pnpm api:update` after a deliberate change)', () => {
    for (const name of PUBLISHED_PACKAGES) {
      expect(existsSync(reportPath(name)), `packages/${name}/api-report.md`).toBe(true);
      expect(built.get(name)!.report, `packages/${name}/api-report.md`).toBe(readFileSync(reportPath(name), 'utf8'));
    }
  });

  it('depend on exactly the packages their built code imports; what only some callers need is an optional peer', () => {
    const sample =
      "import { a } from 'pg';\nexport type { B } from '@idem/database/x';\nimport './c.js';\nawait import('bullmq');";
    expect(importedPackages(sample, { dynamic: false })).toEqual(['pg', '@idem/database']);
    expect(importedPackages(sample, { dynamic: true })).toEqual(['bullmq']);
    for (const name of PUBLISHED_PACKAGES) {
      const manifest = manifestOf(join(root, 'packages', name));
      const { dependencies, peers } = built.get(name)!.needs;
      const shared = dependencies.filter((dependency) => SHARED.has(dependency));
      expect(Object.keys(manifest.dependencies ?? {}).sort(), `@idem/${name} dependencies`).toEqual(
        dependencies.filter((dependency) => !SHARED.has(dependency)),
      );
      expect(Object.keys(manifest.peerDependencies ?? {}).sort(), `@idem/${name} peers`).toEqual(
        [...peers, ...shared].sort(),
      );
      for (const peer of peers)
        expect(manifest.peerDependenciesMeta?.[peer], `@idem/${name}: ${peer}`).toEqual({ optional: true });
      for (const peer of shared) {
        const pinned = manifest.devDependencies?.[peer];
        expect(manifest.peerDependencies?.[peer], `@idem/${name}: ${peer}`).toBe(`^${pinned}`);
        expect(manifest.peerDependenciesMeta?.[peer], `@idem/${name}: ${peer} is required`).toBeUndefined();
      }
    }
  });

  it('each keep a CHANGELOG, shipped with them, whose newest entry is their version', () => {
    for (const name of PUBLISHED_PACKAGES) {
      const dir = join(root, 'packages', name);
      const manifest = manifestOf(dir);
      expect(existsSync(join(dir, 'CHANGELOG.md')), name).toBe(true);
      const newest = /^## (\S+)/m.exec(readFileSync(join(dir, 'CHANGELOG.md'), 'utf8'))?.[1];
      expect(newest, name).toBe(manifest.version);
      expect(manifest.files, name).toContain('CHANGELOG.md');
    }
  });
});
