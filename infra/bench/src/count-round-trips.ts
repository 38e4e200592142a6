/**
 * Preloaded (`--import`) into every process by `pnpm bench:profile` and the round-trip budget
 * test: counts, client-side, what the process asks of its servers — PostgreSQL statements and
 * transactions (through node-postgres, Prisma's adapter included), Redis commands and BullMQ's
 * scripts by name (through ioredis, pipelined ones included) — and writes the counts so far as JSON to
 * IDEM_ROUND_TRIP_DIR/round-trips.<pid>.json on SIGUSR2, numbering each answer (`answer`).
 * Client-side, so another run on the same servers does not count.
 */
import { createHash } from 'node:crypto';
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
  /** EVALSHA / EVAL: Lua scripts — BullMQ's, each one step of a job's life, and the rate limiter's. */
  redisScripts: number;
}

const dir = process.env.IDEM_ROUND_TRIP_DIR;
if (dir) {
  const counts: RoundTripCounts = { statements: 0, transactions: 0, redisCommands: 0, redisScripts: 0 };
  const inTransaction = new WeakSet<pg.Client>();
  const statements: Record<string, number> = {};
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const sql = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
    const verb = /^\s*(\w+)/.exec(sql ?? '')?.[1]?.toUpperCase();
    counts.statements++;
    const kind = statementKind(sql ?? '');
    statements[kind] = (statements[kind] ?? 0) + 1;
    if (verb === 'BEGIN' || verb === 'START') {
      counts.transactions++;
      inTransaction.add(this);
    } else if (verb === 'COMMIT' || verb === 'ROLLBACK') inTransaction.delete(this);
    else if (!inTransaction.has(this)) counts.transactions++;
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query;

  // Which script each EVALSHA runs, by the name it was defined under (BullMQ's `moveToActive`, …).
  const scripts: Record<string, number> = {};
  /** Every other command by its name (`xadd`, `bzpopmin`, …). */
  const commands: Record<string, number> = {};
  const nameOf = new Map<string, string>();
  const sha1 = (lua: string) => createHash('sha1').update(lua).digest('hex');
  const defineCommand = Redis.prototype.defineCommand;
  Redis.prototype.defineCommand = function (this: Redis, name: string, definition: { lua: string }) {
    nameOf.set(sha1(definition.lua), name.replace(/[-:][\d.]+$/, '')); // moveToActive:6.7.0 → moveToActive
    return defineCommand.call(this, name, definition as Parameters<Redis['defineCommand']>[1]);
  };
  const sendCommand = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
    counts.redisCommands++;
    const [command] = args;
    if (/^eval(sha)?(_ro)?$/i.test(command.name)) {
      counts.redisScripts++;
      const first = String(command.args[0]);
      const name = nameOf.get(/^evalsha/i.test(command.name) ? first : sha1(first)) ?? 'another script';
      scripts[name] = (scripts[name] ?? 0) + 1;
    } else commands[command.name] = (commands[command.name] ?? 0) + 1;
    return sendCommand.apply(this, args);
  };

  let answer = 0;
  process.on('SIGUSR2', () => {
    const file = join(dir, `round-trips.${process.pid}.json`);
    writeFileSync(
      `${file}.new`,
      JSON.stringify({ ...counts, scripts, commands, statementKinds: statements, answer: ++answer }),
    );
    renameSync(`${file}.new`, file); // whole, never half-written
  });
}

/**
 * What a statement does, to count statements by it: its verb and the first table it names
 * (`INSERT processed_messages`, `UPDATE outbox_messages`, `BEGIN`); a CTE is named by what it writes.
 */
export function statementKind(sql: string): string {
  const text = sql.replace(/"/g, '').replace(/\s+/g, ' ').trim();
  const verb = /^(\w+)/.exec(text)?.[1]?.toUpperCase() ?? '?';
  const write = /(?<!\b(?:FOR|DO) )\b(INSERT INTO|UPDATE|DELETE FROM)\s+(?:\w+\.)?(\w+)/i.exec(text);
  if (write) return `${verb === 'WITH' ? 'WITH … ' : ''}${write[1]!.split(' ')[0]!.toUpperCase()} ${write[2]}`;
  const read = /\bFROM\s+(?:\w+\.)?(\w+)/i.exec(text);
  if (read) return `${verb} ${read[1]}`;
  const called = /^SELECT\s+(\w+)\(/i.exec(text);
  return called ? `SELECT ${called[1]}()` : verb;
}
