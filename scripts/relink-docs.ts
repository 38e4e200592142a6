/**
 * `pnpm docs:relink`: after code moved, points each code link in docs/ (`[`code`](file#Ln)`)
 * back at the line that now holds its code. A link whose code is gone is left as it is, for
 * infra/repository/docs-links.unit.spec.ts to report: the page around it needs a person, not a script.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';

const docs = resolve(dirname(fileURLToPath(import.meta.url)), '../docs');
for (const page of readdirSync(docs).filter((f) => f.endsWith('.md'))) {
  const path = join(docs, page);
  const text = readFileSync(path, 'utf8');
  const relinked = text.replace(
    /\[`([^`]+)`\]\(([^)#\s]+)#L(\d+)\)/g,
    (link, code: string, target: string, line: string) => {
      const lines = readFileSync(resolve(docs, target), 'utf8').split('\n');
      if (lines[Number(line) - 1]?.includes(code)) return link;
      const found = lines.findIndex((l) => l.includes(code));
      return found < 0 ? link : `[\`${code}\`](${target}#L${found + 1})`;
    },
  );
  if (relinked !== text) {
    // A longer line number can widen a table: the page is written as Prettier would.
    writeFileSync(path, await format(relinked, { ...(await resolveConfig(path)), filepath: path }));
    console.log(`relinked docs/${page}`);
  }
}
