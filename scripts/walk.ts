/**
 * Walks the code the way a reader does with "go to definition": from one function or method,
 * through every call whose definition TypeScript's language service finds in the repository, to
 * the functions whose text matches a pattern. Prints each route (`pnpm walk`, defaults: from
 * BullMQ's job handler to the inbox's INSERT):
 *
 *     pnpm walk [file] [Class.method|function] [pattern]
 *
 * A call through a variable that holds a closure ends a route: the editor lands on the variable,
 * not on code. infra/repository/consume-path.unit.spec.ts holds the consume path to it.
 */
import { readFileSync, realpathSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));

/** A function or method on a route: where it is and its name as a reader says it. */
export interface Step {
  readonly file: string;
  readonly name: string;
  readonly line: number;
}

type FunctionLike = ts.FunctionLikeDeclaration;

let service: ts.LanguageService | undefined;

/** The language service over the repository's tsconfig.json, as an editor has it. */
function languageService(): ts.LanguageService {
  if (service) return service;
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (!config) throw new Error('tsconfig.json could not be read');
  const host: ts.LanguageServiceHost = {
    getCompilationSettings: () => config.options,
    getScriptFileNames: () => config.fileNames,
    getScriptVersion: () => '1',
    getScriptSnapshot: (file) =>
      ts.sys.fileExists(file) ? ts.ScriptSnapshot.fromString(readFileSync(file, 'utf8')) : undefined,
    getCurrentDirectory: () => root,
    getDefaultLibFileName: ts.getDefaultLibFilePath,
    fileExists: ts.sys.fileExists,
    readFile: ts.sys.readFile,
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  };
  service = ts.createLanguageService(host, ts.createDocumentRegistry());
  return service;
}

/** The function a node declares, if it is one: a function, a method, or a variable holding an arrow or function. */
function functionOf(node: ts.Node): FunctionLike | undefined {
  if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node)) return node;
  if (ts.isVariableDeclaration(node) && node.initializer) {
    const init = node.initializer;
    if (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) return init;
  }
  if (ts.isPropertyDeclaration(node) && node.initializer && ts.isArrowFunction(node.initializer))
    return node.initializer;
  return undefined;
}

/** `Class.method`, `#private` kept, or the function's or variable's name. */
function nameOf(fn: FunctionLike): string {
  const holder = ts.isArrowFunction(fn) || ts.isFunctionExpression(fn) ? fn.parent : fn;
  const own = ts.isConstructorDeclaration(holder)
    ? 'constructor'
    : ((holder as ts.NamedDeclaration).name?.getText() ?? '?');
  const owner = holder.parent;
  return ts.isClassLike(owner) && owner.name ? `${owner.name.text}.${own}` : own;
}

function stepOf(fn: FunctionLike): Step {
  const source = fn.getSourceFile();
  return {
    file: relative(root, realpathSync(source.fileName)),
    name: nameOf(fn),
    line: source.getLineAndCharacterOfPosition(fn.getStart()).line + 1,
  };
}

/** The declaration named `name` (`Class.method` or a function) in `file`. */
function findFunction(file: string, name: string): FunctionLike {
  const source = languageService().getProgram()?.getSourceFile(join(root, file));
  if (!source) throw new Error(`${file} is not in the TypeScript project`);
  let found: FunctionLike | undefined;
  const visit = (node: ts.Node) => {
    const fn = functionOf(node);
    if (fn && nameOf(fn) === name) found ??= fn;
    ts.forEachChild(node, visit);
  };
  visit(source);
  if (!found) throw new Error(`no function ${name} in ${file}`);
  return found;
}

/** Where each call in `fn` (its nested callbacks included) leads: the functions of the repository it names. */
function callees(fn: FunctionLike): FunctionLike[] {
  const ls = languageService();
  const program = ls.getProgram()!;
  const source = fn.getSourceFile();
  const found: FunctionLike[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const at = ts.isPropertyAccessExpression(callee) ? callee.name : ts.isIdentifier(callee) ? callee : undefined;
      for (const definition of at ? (ls.getDefinitionAtPosition(source.fileName, at.getStart()) ?? []) : []) {
        // A workspace package is reached through node_modules' links: its real file is ours.
        const real = realpathSync(definition.fileName);
        if (real.includes('/node_modules/') || !real.startsWith(root)) continue;
        const target = program.getSourceFile(definition.fileName);
        const declaration = target && nodeAt(target, definition.textSpan.start);
        const called = declaration && functionOf(declaration);
        if (called && called.body) found.push(called);
      }
    }
    ts.forEachChild(node, visit);
  };
  if (fn.body) visit(fn.body);
  return found;
}

/** The declaration whose name starts at `position`. */
function nodeAt(source: ts.SourceFile, position: number): ts.Node | undefined {
  let found: ts.Node | undefined;
  const visit = (node: ts.Node) => {
    if (position < node.getStart(source) || position >= node.getEnd()) return;
    const name = (node as ts.NamedDeclaration).name;
    if (name && name.getStart(source) === position && functionOf(node)) found = node;
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Every route from `start` to a function whose own text matches `goal`, without going through
 * one function twice; a route ends at the first function that matches.
 */
export function walkFrom(start: { file: string; name: string }, goal: RegExp, maxDepth = 10): Step[][] {
  const routes: Step[][] = [];
  const walk = (fn: FunctionLike, route: FunctionLike[]) => {
    const here = [...route, fn];
    if (goal.test(fn.body?.getText() ?? '')) {
      routes.push(here.map(stepOf));
      return;
    }
    if (here.length >= maxDepth) return;
    for (const next of new Set(callees(fn))) if (!here.includes(next)) walk(next, here);
  };
  walk(findFunction(start.file, start.name), []);
  return routes;
}

// Prints the routes when run (`pnpm walk`).
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [
    file = 'packages/transport/src/consumer-runner.ts',
    name = 'ConsumerRunner.process',
    pattern = 'INSERT INTO processed_messages',
  ] = process.argv.slice(2);
  const routes = walkFrom({ file, name }, new RegExp(pattern));
  if (routes.length === 0) console.log(`no route from ${name} to /${pattern}/`);
  for (const route of routes) {
    console.log(`route ${routes.indexOf(route) + 1}:`);
    for (const step of route) console.log(`  ${step.name}  (${step.file}:${step.line})`);
  }
}
