/**
 * Code shown inline in the docs is the code that runs: a fenced block after
 * `<!-- excerpt: <path> -->` must be, piece by piece (a line `// …`, or `// … <what it leaves
 * out>`, separates the pieces), lines of that file as they are (indentation aside: Prettier
 * indents a block on its own) — consecutive within a piece, the pieces in the file's order. A
 * change to an excerpted line fails here until the page shows it. On the page a student reads
 * first (docs/algorithm.md) every gap says what it leaves out: a bare `// …` there once hid the
 * read before the inbox's insert, which looked like the read-then-insert mistake.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A line between two pieces of an excerpt: `// …`, and what it leaves out, if it says. */
const ELISION = /\n\s*\/\/ …([^\n]*)\n/g;

/** Every excerpt of every page of docs/: the file it names, its pieces (each a list of lines), and what each gap says it leaves out. */
function excerpts() {
  return readdirSync(join(root, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .flatMap((file) => {
      const text = readFileSync(join(root, 'docs', file), 'utf8');
      return [...text.matchAll(/<!-- excerpt: (\S+) -->\n+```\w*\n([\s\S]*?)\n```/g)].map((m) => ({
        page: `docs/${file}`,
        path: m[1]!,
        pieces: m[2]!
          .replace(ELISION, '\n// …\n')
          .split('\n// …\n')
          .map((piece) => piece.split('\n').map((line) => line.trim())),
        gaps: [...m[2]!.matchAll(ELISION)].map((gap) => gap[1]!.trim()),
      }));
    });
}

/** Where the pieces are missing from `lines` (in order, each piece's lines consecutive), if anywhere. */
function missingPiece(lines: readonly string[], pieces: readonly (readonly string[])[]): string | undefined {
  let from = 0;
  for (const piece of pieces) {
    const at = lines.findIndex((_, i) => i >= from && piece.every((line, j) => lines[i + j] === line));
    if (at < 0) return piece[0];
    from = at + piece.length;
  }
  return undefined;
}

describe('the excerpts of code in docs/', () => {
  const found = excerpts();

  it('exist (docs/algorithm.md shows the algorithm inline)', () => {
    expect(found.filter((excerpt) => excerpt.page === 'docs/algorithm.md').length).toBeGreaterThanOrEqual(6);
  });

  it('are lines of the files they name, as they are now', () => {
    const stale = found.flatMap(({ page, path, pieces }) => {
      const lines = readFileSync(join(root, path), 'utf8')
        .split('\n')
        .map((line) => line.trim());
      const missing = missingPiece(lines, pieces);
      return missing === undefined ? [] : [`${page}: ${path} no longer has: ${missing.trim()}`];
    });
    expect(stale).toEqual([]);
  });

  it('say, in docs/algorithm.md, what each gap leaves out', () => {
    const bare = found
      .filter((excerpt) => excerpt.page === 'docs/algorithm.md')
      .flatMap(({ path, gaps }) => gaps.filter((gap) => gap.length < 10).map(() => `${path}: a bare \`// …\``));
    expect(bare).toEqual([]);
  });
});
