import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository the scaffold writes into. */
export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export class ScaffoldError extends Error {}

/** Every file the scaffold wrote, for Prettier to format. */
export const touched = new Set<string>();

/** Writes a new file; refuses to overwrite one (a scaffold never loses someone's work). */
export function create(path: string, text: string): void {
  const file = join(root, path);
  if (existsSync(file)) throw new ScaffoldError(`${path} exists already; nothing was overwritten`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
  touched.add(path);
  console.log(`  created  ${path}`);
}

/**
 * Inserts `text` into a file next to the one line that contains `anchor` (its last occurrence,
 * so that a list grows at its end), unless the file already contains `text`.
 */
export function insert(path: string, where: 'before' | 'after', anchor: string | RegExp, text: string): void {
  const file = join(root, path);
  const source = readFileSync(file, 'utf8');
  if (source.includes(text.trim())) return;
  const lines = source.split('\n');
  const at = lines.findLastIndex((line) => (typeof anchor === 'string' ? line.includes(anchor) : anchor.test(line)));
  if (at < 0) throw new ScaffoldError(`${path}: no line matches ${String(anchor)}; add it by hand`);
  lines.splice(where === 'after' ? at + 1 : at, 0, ...text.replace(/\n$/, '').split('\n'));
  writeFileSync(file, lines.join('\n'));
  touched.add(path);
  console.log(`  updated  ${path}`);
}

/** Replaces every match of `pattern` in a file (which must match at least once). */
export function replace(path: string, pattern: RegExp, by: (match: string, ...groups: string[]) => string): void {
  const file = join(root, path);
  const source = readFileSync(file, 'utf8');
  if (source.search(pattern) < 0)
    throw new ScaffoldError(`${path}: nothing matches ${String(pattern)}; edit it by hand`);
  writeFileSync(file, source.replace(pattern, by));
  touched.add(path);
  console.log(`  updated  ${path}`);
}

export const camel = (kebab: string) => kebab.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
export const pascal = (kebab: string) => camel(kebab).replace(/^./, (c) => c.toUpperCase());
