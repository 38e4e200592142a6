/**
 * Preloaded (`--import`) into every process by `pnpm bench:profile` and the round-trip budget
 * test: counts, client-side, what the process asks of its servers — PostgreSQL statements and
 * transactions (through node-postgres, Prisma's adapter included), Redis commands and BullMQ's
 * scripts (through ioredis, pipelined ones included) — and writes the counts so far as JSON to
 * IDEM_ROUND_TRIP_DIR/round-trips.<pid>.json on SIGUSR2, numbering each answer (`answer`).
 * Client-side, so another run on the same servers does not count.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';

/** What one process asked of its servers so far. */
export interface RoundTripCounts {
  statements: number;
  /** BEGIN … COMMIT counts once, and so does each statement sent outside one. */
  transactions: number;
  redisCommands: number;
  /** EVALSHA / EVAL: BullMQ's Lua scripts, each one step of a job's life. */
  redisScripts: number;
}

const dir = process.env.IDEM_ROUND_TRIP_DIR;
if (dir) {
  const counts: RoundTripCounts = { statements: 0, transactions: 0, redisCommands: 0, redisScripts: 0 };
  const inTransaction = new WeakSet<pg.Client>();
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const sql = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
    const verb = /^\s*(\w+)/.exec(sql ?? '')?.[1]?.toUpperCase();
    counts.statements++;
    if (verb === 'BEGIN' || verb === 'START') {
      counts.transactions++;
      inTransaction.add(this);
    } else if (verb === 'COMMIT' || verb === 'ROLLBACK') inTransaction.delete(this);
    else if (!inTransaction.has(this)) counts.transactions++;
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query;

  const sendCommand = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
    counts.redisCommands++;
    if (/^eval(sha)?(_ro)?$/i.test(args[0].name)) counts.redisScripts++;
    return sendCommand.apply(this, args);
  };

  let answer = 0;
  process.on('SIGUSR2', () => {
    const file = join(dir, `round-trips.${process.pid}.json`);
    writeFileSync(`${file}.new`, JSON.stringify({ ...counts, answer: ++answer }));
    renameSync(`${file}.new`, file); // whole, never half-written
  });
}
