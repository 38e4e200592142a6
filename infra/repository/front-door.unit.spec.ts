/**
 * The README is a learner's front door, and what it and the learning pages state is what the code
 * does: it stays short; the addresses it gives are the ones compose publishes, the native run's
 * ports the ones it listens on; every list of the fault switches names all of them, and each
 * failure window has its picture; the reading order is stated once and each page of it leads to
 * the next; algorithm.md needs nothing outside the repository; the README's picture is the one the
 * browser test takes. Each of these was once false on a page (issue 72).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { FAULT_NAMES } from '@idem/faults';
import { DEFAULT_PORTS } from '@idem/native-run';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { README_SCREENSHOT } from '../../e2e/browser.js';
import { interpolate, read, root, type ComposeService } from './compose-file.js';

/** The README's bound: what a student reads in ten minutes. */
const README_MAX_LINES = 130;

const pages = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** A page without its fenced code blocks. */
const prose = (page: string) => read(page).replace(/^```[\s\S]*?^```/gm, '');

/** The lines of a page's section, from its heading to the next heading of any level. */
function section(page: string, heading: string): string {
  const lines = read(page).split('\n');
  const start = lines.findIndex((line) => line.replace(/^#+ /, '') === heading && line.startsWith('#'));
  if (start < 0) throw new Error(`${page} has no section "${heading}"`);
  const end = lines.findIndex((line, i) => i > start && line.startsWith('#'));
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

/** The host port compose publishes a service's first port on, on a first start (no .env). */
function publishedPort(service: string): number {
  const compose = parse(interpolate(read('docker-compose.yml'), {}), { merge: true }) as {
    services: Record<string, ComposeService>;
  };
  const [first] = compose.services[service]?.ports ?? [];
  if (!first) throw new Error(`compose publishes no port of ${service}`);
  return Number(first.split(':').at(-2));
}

/**
 * Where a page lists some of the fault switches as if it listed them all: a run of five or more
 * named one after another (`a`, `b`, `c`, `d` and `e`: fewer are a group, like the switches a
 * consumer name targets), or a table whose rows start with a switch.
 */
function partialSwitchLists(page: string, text: string): string[] {
  const name = `\`(${FAULT_NAMES.join('|')})\``;
  const runs = [
    ...text.replace(/\n/g, ' ').matchAll(new RegExp(`${name}(?:,?\\s+(?:and\\s+|or\\s+)?${name}){4,}`, 'g')),
  ];
  // A table: consecutive lines that start with `|`.
  const tables = text
    .split(/\n(?!\|)/)
    .map((block) => block.trim())
    .filter((block) => block.startsWith('|'))
    .map((table) => table.split('\n').filter((row) => new RegExp(`^\\|\\s*${name}\\s*\\|`).test(row)))
    .filter((rows) => rows.length > 0);
  const lists = [...runs.map((run) => run[0]), ...tables.map((rows) => rows.join('\n'))];
  return lists.flatMap((list) => {
    const missing = FAULT_NAMES.filter((fault) => !list.includes(`\`${fault}\``));
    return missing.length > 0 ? [`${page}: a list of the fault switches without ${missing.join(', ')}`] : [];
  });
}

/** The pages of the README's reading order, in order. */
function readingOrder(): string[] {
  return [...section('README.md', 'Read it in this order').matchAll(/^\d+\. \[[^\]]*\]\(([^)]+)\)/gm)].map(
    (m) => m[1]!,
  );
}

/** Where a page's "Next:" leads, relative to the repository. */
function nextOf(page: string): string[] {
  return [...read(page).matchAll(/^Next: .*?\]\(([^)#]+)/gm)].map((m) =>
    relative(root, resolve(dirname(join(root, page)), m[1]!)),
  );
}

describe('the front door and the learning pages', () => {
  it(`keeps the README to ${README_MAX_LINES} lines: what a student reads in ten minutes`, () => {
    expect(read('README.md').trimEnd().split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('gives the addresses compose publishes: the console, Mailpit, Jaeger and Grafana', () => {
    const where = {
      'the console': 'console',
      Mailpit: 'mailpit',
      Jaeger: 'jaeger',
      Grafana: 'grafana',
      Prometheus: 'prometheus',
      'Stripe simulator': 'stripe-sim',
    };
    for (const page of ['README.md', 'docs/compose.md']) {
      const rows = read(page)
        .split('\n')
        .filter((line) => line.startsWith('| '));
      for (const [label, service] of Object.entries(where)) {
        const row = rows.find((line) => line.split('|')[1]!.trim().startsWith(label));
        if (!row && page === 'docs/compose.md') throw new Error(`${page} has no row for ${label}`);
        if (!row) continue;
        expect(row, `${page}: ${label}`).toContain(`http://127.0.0.1:${publishedPort(service)}`);
      }
    }
    const readme = section('README.md', 'Where to look');
    for (const label of ['the console', 'Mailpit', 'Jaeger', 'Grafana']) expect(readme).toContain(label);
  });

  it("gives the native run's ports as it listens on them", () => {
    const apis = Object.entries(DEFAULT_PORTS)
      .filter(([part]) => !['console', 'stripe', 'smtp', 'mail'].includes(part))
      .map(([, port]) => port)
      .sort((a, b) => a - b);
    const native = section('CONTRIBUTING.md', 'Run it without Docker').replace(/\s+/g, ' ');
    expect(native).toContain(`the console on ${DEFAULT_PORTS.console},`);
    expect(native).toContain(`the four APIs on ${apis[0]}–${apis.at(-1)},`);
    expect(apis).toHaveLength(4);
    expect(native).toContain(`the Stripe simulator on ${DEFAULT_PORTS.stripe},`);
    expect(native).toContain(`the SMTP sink on ${DEFAULT_PORTS.smtp} and its mail API on ${DEFAULT_PORTS.mail}`);
    expect(section('README.md', 'Going further')).toContain(`the console on http://127.0.0.1:${DEFAULT_PORTS.console}`);
  });

  it('lists every fault switch wherever it lists them', () => {
    expect(pages.flatMap((page) => partialSwitchLists(page, prose(page)))).toEqual([]);
    expect(section('README.md', 'Break it')).toMatch(new RegExp(FAULT_NAMES.map((f) => `\`${f}\``).join('[\\s\\S]*')));
    // What the check catches: the README's old list, six of the seven.
    expect(
      partialSwitchLists(
        'x.md',
        '`crash-after-commit`,\n`rollback-after-handler`, `crash-after-publish`, `publish-twice`, `crash-after-provider-call`,\n`crash-after-send` — from the console',
      ),
    ).toEqual(['x.md: a list of the fault switches without crash-after-retry-copy']);
    expect(
      partialSwitchLists(
        'x.md',
        'A table:\n\n| switch | what |\n| --- | --- |\n| `crash-after-commit` | x |\n| `publish-twice` | y |',
      ),
    ).toHaveLength(1);
  });

  it('draws each failure window a switch opens, in failure-windows.md', () => {
    const page = read('docs/failure-windows.md');
    const sections = page.split(/^## /m);
    const undrawn = FAULT_NAMES.filter((fault) => fault !== 'publish-twice').filter(
      (fault) => !sections.some((s) => s.includes(`Switch \`${fault}\``) && s.includes('```mermaid')),
    );
    expect(undrawn).toEqual([]);
  });

  it('states one reading order, in the README, and each page of it leads to the next', () => {
    const order = readingOrder();
    expect(order).toEqual(expect.arrayContaining(['docs/algorithm.md', 'docs/tour.md', 'docs/failure-windows.md']));
    for (const [i, page] of order.entries()) {
      expect(existsSync(join(root, page)), page).toBe(true);
      expect(nextOf(page), `${page}'s "Next:"`).toEqual(i + 1 < order.length ? [order[i + 1]] : []);
    }
    // No other page says what to read next, and the README links the order's pages in that section only.
    const others = pages.filter((page) => !order.includes(page) && page !== 'README.md');
    expect(others.filter((page) => nextOf(page).length > 0)).toEqual([]);
    const elsewhere = read('README.md').replace(section('README.md', 'Read it in this order'), '');
    expect(order.filter((page) => elsewhere.includes(`](${page})`))).toEqual([]);
  });

  it('keeps algorithm.md whole on its own: no link or path out of the repository', () => {
    const text = read('docs/algorithm.md');
    expect(text).not.toMatch(/https?:\/\//);
    // A link is relative to the page; a path in prose, to the repository (as `infra/…` is).
    const outside = (path: string, from: string) => relative(root, resolve(from, path)).startsWith('..');
    const links = [...text.matchAll(/\]\(((?:\.\.\/)+[^)\s]+)\)/g)].map((m) => m[1]!);
    const paths = [...text.matchAll(/`((?:\.\.\/)+[^`\s]+)`/g)].map((m) => m[1]!);
    expect([
      ...links.filter((link) => outside(link, join(root, 'docs'))),
      ...paths.filter((path) => outside(path, root)),
    ]).toEqual([]);
  });

  it('shows, in the README, the picture the browser test takes', () => {
    expect(read('README.md')).toContain(`](${README_SCREENSHOT})`);
    expect(existsSync(join(root, README_SCREENSHOT))).toBe(true);
    expect(readFileSync(join(root, 'e2e/exercises.ts'), 'utf8')).toContain('readmeScreenshotPath()');
  });
});
