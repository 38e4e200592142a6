/**
 * Preloaded into every process by `pnpm bench:profile` (`--import`): counts the statements each
 * process sends to PostgreSQL through node-postgres (Prisma's adapter included) and writes the
 * count to IDEM_QUERY_COUNT_DIR when the process exits.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

const dir = process.env.IDEM_QUERY_COUNT_DIR;
if (dir) {
  let statements = 0;
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    statements++;
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query;
  // The count so far, on demand (SIGUSR2): at the start and at the end of the measured window.
  let samples = 0;
  process.on('SIGUSR2', () => writeFileSync(join(dir, `statements.${process.pid}.${++samples}`), String(statements)));
}
