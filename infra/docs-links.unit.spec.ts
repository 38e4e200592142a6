/**
 * The documentation points at code that exists: every relative link in README.md and docs/
 * resolves to a file, every `#L<n>` anchor to a line of it, and a link whose text is code
 * (`…`) lands on a line that still contains that code — so a tour step cannot silently drift
 * away from the line that does it.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Every `[text](target)` of a Markdown page, outside fenced code blocks. */
function links(page: string): { text: string; target: string }[] {
  const text = readFileSync(join(root, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return [...text.matchAll(/\[((?:`[^`]*`|[^\]])*)\]\(([^)\s]+)\)/g)].map((m) => ({ text: m[1]!, target: m[2]! }));
}

/** Where a link points and what is wrong with it, if anything. */
function problem(page: string, { text, target }: { text: string; target: string }): string | undefined {
  if (/^(https?:|mailto:)/.test(target) || target.startsWith('#')) return undefined;
  const [path, anchor] = target.split('#') as [string, string | undefined];
  const file = resolve(dirname(join(root, page)), path);
  if (!existsSync(file)) return `${page}: ${target} does not exist`;
  const line = /^L(\d+)$/.exec(anchor ?? '')?.[1];
  if (!line) return undefined;
  const lines = readFileSync(file, 'utf8').split('\n');
  const content = lines[Number(line) - 1];
  if (content === undefined) return `${page}: ${target} is past the end of the file`;
  const code = /^`([^`]+)`$/.exec(text)?.[1];
  if (code && !content.includes(code)) return `${page}: ${target} no longer contains \`${code}\``;
  return undefined;
}

describe('the documentation', () => {
  it('has the tour, the failure windows, the concepts page and their links from the README', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    for (const doc of ['docs/tour.md', 'docs/failure-windows.md', 'docs/concepts.md']) {
      expect(existsSync(join(root, doc)), doc).toBe(true);
      expect(readme, `README links ${doc}`).toContain(`(${doc})`);
    }
    expect(links('docs/tour.md').filter((l) => l.target.includes('#L')).length).toBeGreaterThan(10);
  });

  it('links only to files and lines that exist, and code links still land on their code', () => {
    const problems = pages.flatMap((page) => links(page).map((link) => problem(page, link))).filter(Boolean);
    // After code moved, `pnpm docs:relink` points each code link at the line that now holds its code.
    expect(problems).toEqual([]);
  });

  it('would notice a link that drifted', () => {
    expect(problem('docs/tour.md', { text: '`no such code here`', target: '../package.json#L2' })).toMatch(
      /no longer contains/,
    );
    expect(problem('docs/tour.md', { text: 'x', target: '../nowhere.ts' })).toMatch(/does not exist/);
  });
});
