/**
 * The documentation points at code that exists: every relative link in README.md and docs/
 * resolves to a file, every `#L<n>` anchor to a line of it, and a link whose text is code
 * (`…`) lands on a line that still contains that code, and on the only one — so a tour step
 * cannot silently drift away from the line that does it, nor land on a twin. The pointers code
 * and messages give (`README "<section>"`, `docs/<page>.md`) lead to a section and a page that
 * exist. And one word per idea: no phrase the glossary (docs/concepts.md) says not to write.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pages = [
  'README.md',
  'CONTRIBUTING.md',
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
  if (/^(https?:|mailto:)/.test(target)) return undefined;
  const [path, anchor] = target.split('#') as [string, string | undefined];
  const file = path ? resolve(dirname(join(root, page)), path) : join(root, page);
  if (!existsSync(file)) return `${page}: ${target} does not exist`;
  const line = /^L(\d+)$/.exec(anchor ?? '')?.[1];
  if (anchor && !line && file.endsWith('.md') && !anchorsOf(file).has(anchor))
    return `${page}: ${target} names no heading of ${path || page}`;
  if (!line) return undefined;
  const lines = readFileSync(file, 'utf8').split('\n');
  const content = lines[Number(line) - 1];
  if (content === undefined) return `${page}: ${target} is past the end of the file`;
  const code = /^`([^`]+)`$/.exec(text)?.[1];
  if (code && !content.includes(code)) return `${page}: ${target} no longer contains \`${code}\``;
  const twins = code ? lines.filter((l) => l.includes(code)).length : 0;
  if (twins > 1) return `${page}: \`${code}\` is on ${twins} lines of ${path}: link code that is on one`;
  return undefined;
}

/** The anchors GitHub gives a Markdown page's headings: lower case, punctuation dropped, spaces as `-`. */
function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return new Set(
    [...text.matchAll(/^#+ (.+)$/gm)].map((m) =>
      m[1]!
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    ),
  );
}

/** The files whose comments and messages may point a reader somewhere: code, SQL, scripts, configuration. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return ['node_modules', 'generated', 'dist'].includes(entry.name) ? [] : sourceFiles(path);
    return /\.(ts|sql|sh|prisma|ya?ml)$/.test(entry.name) ? [path] : [];
  });
}

/** The READMEs of the packages and examples, which travel with what they describe. */
const packageReadmes = () =>
  ['packages', 'examples', 'infra'].flatMap((dir) =>
    readdirSync(join(root, dir), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && existsSync(join(root, dir, entry.name, 'README.md')))
      .map((entry) => `${dir}/${entry.name}/README.md`),
  );

/** The headings of a page of the repository (none when it does not exist). */
const sectionsOf = (page: string) =>
  existsSync(join(root, page))
    ? new Set([...readFileSync(join(root, page), 'utf8').matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.trim()))
    : new Set<string>();

/**
 * Where a pointer in `text` (a file's, named `where`) leads nowhere: a section
 * (`README "<section>"`, `docs/<page>.md "<section>"`) or a page that is not there.
 */
function stalePointers(where: string, text: string): string[] {
  // A pointer may be split over two lines of a comment or a paragraph: read the text as one line.
  const joined = text.replace(/\s*\n\s*(?:\*(?!\/)|\/\/|#)?\s*/g, ' ');
  const sections = [...joined.matchAll(/\b(README|docs\/[\w-]+\.md) "([^"]+)"/g)]
    .filter(([, page, section]) => !sectionsOf(page === 'README' ? 'README.md' : page!).has(section!))
    .map(([, page, section]) => `${where}: ${page} has no section "${section}"`);
  const docs = [...text.matchAll(/(?<![\w/.'-])((?:\.\.\/)*(?:docs\/[\w-]+|[A-Z][A-Z_]+)\.md)\b/g)]
    .filter(([, page]) => !existsSync(join(root, page!.replace(/^(\.\.\/)+/, ''))))
    .map(([, page]) => `${where}: ${page} is not in the repository`);
  return [...sections, ...docs];
}

/**
 * The `@idem` packages a file's opening comment names (a version tag such as `@idem/inbox@0.2.0`
 * aside) that it neither imports nor belongs to: a header that says where the file takes
 * something from, naming a package it no longer takes it from.
 */
function headerPackagesNotImported(file: string, text: string): string[] {
  const header = /^\s*(?:\/\/[^\n]*\n\s*)*\/\*\*([\s\S]*?)\*\//.exec(text)?.[1];
  if (!header) return [];
  const imported = new Set([...text.matchAll(/from '@idem\/([a-z-]+)'/g)].map((m) => m[1]!));
  const own = /^(?:packages|infra|services)\/([a-z-]+)\//.exec(file)?.[1];
  return [...new Set([...header.matchAll(/@idem\/([a-z-]+)(?![\w@-])/g)].map((m) => m[1]!))]
    .filter((name) => !imported.has(name) && name !== own)
    .map((name) => `${file}: its header names @idem/${name}, which it does not import`);
}

/**
 * The keys and indexes of partitioned tables, from the migrations' SQL (the services' and the
 * packages' table sets'): the
 * database reports a violation on the partition's copy (`processed_messages_p…_pkey`), never on
 * these, so a page that names one as what a conflict is "on" is out of date.
 */
function partitionedKeys(): Set<string> {
  const sources = ['packages', 'services'].flatMap(sourceFiles).filter((file) => file.endsWith('.sql'));
  const names = new Set<string>();
  for (const file of sources) {
    const sql = readFileSync(join(root, file), 'utf8');
    for (const [, body] of sql.matchAll(/CREATE TABLE "?\w+"? \(([\s\S]*?)\n\) PARTITION BY/g))
      for (const [, name] of body!.matchAll(/CONSTRAINT "?(\w+)"?/g)) names.add(name!);
  }
  return names;
}

/** Where a page names a partitioned table's key as if a violation were reported on it. */
function namesPartitionedKey(where: string, text: string, keys: Set<string>): string[] {
  return [...text.matchAll(/`(\w+_(?:pkey|key|fkey|idx))`/g)]
    .filter(([, name]) => keys.has(name!))
    .map(([, name]) => `${where}: \`${name}\` is a partitioned table's key; violations name each partition's own`);
}

/** Lines of `text` that state how long a test run takes (the benchmark's own duration aside). */
function tierDurations(where: string, text: string): string[] {
  return text
    .split('\n')
    .flatMap((line, index) =>
      /(~\s?\d+(–\d+)?\s?(min|minutes)\b|\d+–\d+\s?minutes)/.test(line) && !line.includes('pnpm bench')
        ? [`${where}:${index + 1}: a duration of a test run — say it in CONTRIBUTING.md "Test tiers" only`]
        : [],
    );
}

/**
 * What the glossary's "not this way" column refuses, per term: the phrases it gives in backticks,
 * and, where it says a term is "said only beside" some words, those words — the term anywhere
 * else (its line and the two before it name none of them) is the term in a second meaning.
 */
function wordsNotToUse(): { phrase: string; term: string; onlyBeside?: string[] }[] {
  const glossary = readFileSync(join(root, 'docs/concepts.md'), 'utf8').split('\n');
  return glossary
    .filter((line) => line.startsWith('| **'))
    .flatMap((line) => {
      const [term, , not = ''] = line.split(' | ').map((cell) => cell.replace(/^\|\s*/, '').trim());
      const [refused = '', beside] = not.split('said only beside');
      const phrases = [...refused.matchAll(/`([^`]+)`/g)].map((m) => ({ phrase: m[1]!, term: term! }));
      if (beside === undefined) return phrases;
      const name = /^\*\*(.+?)\*\*/.exec(term!)![1]!;
      return [
        ...phrases,
        { phrase: name, term: term!, onlyBeside: [...beside.matchAll(/`([^`]+)`/g)].map((m) => m[1]!) },
      ];
    });
}

/** Identifiers read as words: `settleWindowMs` and `SETTLE_WINDOW_MS` both say "settle window ms". */
const asWords = (line: string) =>
  line
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .toLowerCase();

/**
 * Where `text` (a file's, named `where`) says a phrase the glossary refuses: one line per hit. A
 * phrase given in words is found in identifiers too (`settle window` in `settleWindowMs`); one
 * given as an identifier (`needs_attention`) only as it is written.
 */
function wrongWords(where: string, text: string, words = wordsNotToUse()): string[] {
  const lines = text.split('\n');
  const spoken = lines.map(asWords); // each line as words once, for every phrase
  const escape = (phrase: string) => phrase.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return words.flatMap(({ phrase, term, onlyBeside }) => {
    const pattern = new RegExp(`(?<![\\w-])${escape(phrase)}(?![\\w-])`, 'i');
    const inWords = /^[a-z ]+$/.test(phrase) ? new RegExp(`\\b${escape(phrase)}s?\\b`) : undefined;
    return lines.flatMap((line, index) => {
      if (!pattern.test(line) && !inWords?.test(spoken[index]!)) return [];
      if (!onlyBeside) return [`${where}:${index + 1}: "${phrase}" — say it as the glossary's ${term} does`];
      const near = lines.slice(Math.max(0, index - 2), index + 1).join(' ');
      if (onlyBeside.some((marker) => near.includes(marker))) return [];
      return [
        `${where}:${index + 1}: "${phrase}" away from ${onlyBeside.join(', ')} — the glossary's ${term} is that alone`,
      ];
    });
  });
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

  it("points code's and messages' readers only at README sections and pages that exist", () => {
    const files = ['packages', 'services', 'infra', 'scripts', 'deploy', 'e2e']
      .flatMap(sourceFiles)
      .filter((file) => file !== 'infra/repository/docs-links.unit.spec.ts'); // its own examples lead nowhere on purpose
    expect(files.length).toBeGreaterThan(100);
    // The repository's own settings files speak to their reader too.
    const settings = ['.env.example', 'docker-compose.yml', '.ci/run'];
    const problems = [...files, ...settings, ...pages].flatMap((file) =>
      stalePointers(file, readFileSync(join(root, file), 'utf8')),
    );
    expect(problems).toEqual([]);
  });

  it("names in a file's opening comment only the @idem packages it imports (or is part of)", () => {
    const files = ['packages', 'services', 'infra', 'scripts', 'deploy', 'e2e']
      .flatMap(sourceFiles)
      .filter((file) => file.endsWith('.ts') && !file.includes('.spec.'));
    const problems = files.flatMap((file) => headerPackagesNotImported(file, readFileSync(join(root, file), 'utf8')));
    expect(problems).toEqual([]);
    // What it caught: deploy/kubernetes/generate.ts said its services came from @idem/native-run.
    expect(
      headerPackagesNotImported(
        'deploy/kubernetes/generate.ts',
        "/**\n * the services and their ports (@idem/native-run)\n */\nimport { SERVICE_NAMES } from '@idem/shop';",
      ),
    ).toEqual(['deploy/kubernetes/generate.ts: its header names @idem/native-run, which it does not import']);
  });

  it("names the keys a conflict is reported on, not a partitioned table's (the partition's own)", () => {
    const keys = partitionedKeys();
    expect(keys).toContain('processed_messages_pkey');
    const problems = [...pages, ...packageReadmes()].flatMap((page) =>
      namesPartitionedKey(page, readFileSync(join(root, page), 'utf8'), keys),
    );
    expect(problems).toEqual([]);
    expect(namesPartitionedKey('x.md', 'SQLSTATE 23505 on `processed_messages_pkey`', keys)).toHaveLength(1);
  });

  it("says how long a test tier takes in one place, CONTRIBUTING's table, so two pages cannot disagree", () => {
    const problems = [...pages, ...packageReadmes()]
      .filter((page) => page !== 'CONTRIBUTING.md')
      .flatMap((page) => tierDurations(page, readFileSync(join(root, page), 'utf8')));
    expect(problems).toEqual([]);
    expect(tierDurations('x.md', 'The compose test takes ~8–10 minutes.\n`pnpm bench` # ~8 min')).toEqual([
      'x.md:1: a duration of a test run — say it in CONTRIBUTING.md "Test tiers" only',
    ]);
  });

  it('uses one word per idea: none of the phrases the glossary says not to write, in docs or code', () => {
    const words = wordsNotToUse();
    expect(words.map((word) => word.phrase)).toEqual(
      expect.arrayContaining(['settleAll', 'needs_attention', 'settle window', 'onSettled', 'dedupe key']),
    );
    // Migrations are history: they keep the words they were written with.
    const files = ['packages', 'services', 'infra', 'scripts', 'deploy', 'e2e', 'examples']
      .flatMap(sourceFiles)
      .filter((file) => !file.includes('/migrations/') && file !== 'infra/repository/docs-links.unit.spec.ts');
    const problems = [...files, ...pages, ...packageReadmes()].flatMap((file) => {
      const text = readFileSync(join(root, file), 'utf8');
      // The glossary's own rows name the words not to write.
      const said = file === 'docs/concepts.md' ? text.replace(/^\| \*\*.*$/gm, '') : text;
      return wrongWords(file, said, words);
    });
    expect(problems).toEqual([]);
    expect(wrongWords('x.ts', '// the Needs_Attention status\nawait settleAll(tasks);', words)).toHaveLength(2);
    // A second meaning of settle, in prose or in an identifier, and a dedupe key that is not the inbox's.
    expect(wrongWords('x.ts', 'const settleWindowMs = 60_000;', words)).toHaveLength(1);
    expect(wrongWords('x.md', 'Wait until the settle window has passed.', words)).toHaveLength(1);
    expect(wrongWords('x.ts', "worker.on('failed', onSettled);", words)).toHaveLength(1);
    expect(wrongWords('x.md', 'Work items carry dedupe keys.', words)).toEqual([
      expect.stringContaining('"dedupe key" away from'),
    ]);
    expect(wrongWords('x.md', 'The dedupe key `(consumer, message_id)` decides.', words)).toEqual([]);
  });

  it('would notice a link that drifted, a link to a twin, and a pointer to nowhere', () => {
    const manifest = readFileSync(join(root, 'package.json'), 'utf8').split('\n');
    const at = (code: string) => `../package.json#L${manifest.findIndex((l) => l.includes(code)) + 1}`;
    expect(problem('docs/tour.md', { text: '`"private": true`', target: at('"private": true') })).toBeUndefined();
    expect(problem('docs/tour.md', { text: '`vitest run`', target: at('vitest run') })).toMatch(/on \d+ lines/);
    expect(stalePointers('x.ts', '// see README "Nowhere"; docs/nowhere.md; DESIGN.md')).toEqual([
      'x.ts: README has no section "Nowhere"',
      'x.ts: docs/nowhere.md is not in the repository',
      'x.ts: DESIGN.md is not in the repository',
    ]);
    // A pointer split over two lines of a comment is still read.
    expect(stalePointers('x.ts', '/**\n * see README\n * "Nowhere at all"\n */')).toEqual([
      'x.ts: README has no section "Nowhere at all"',
    ]);
    expect(stalePointers('x.ts', '// docs/operations.md "Nowhere"')).toEqual([
      'x.ts: docs/operations.md has no section "Nowhere"',
    ]);
    expect(
      stalePointers('x.ts', '// README "Read it in this order", docs/tour.md, docs/operations.md "Fault switches"'),
    ).toEqual([]);
    expect(problem('docs/tour.md', { text: '`no such code here`', target: '../package.json#L2' })).toMatch(
      /no longer contains/,
    );
    expect(problem('docs/tour.md', { text: 'x', target: '../nowhere.ts' })).toMatch(/does not exist/);
  });
});
