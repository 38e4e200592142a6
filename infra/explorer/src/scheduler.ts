import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';

/**
 * Statement-level scheduling of two transactions on one PostgreSQL database. Each side of a pair
 * runs with its own connection; every statement it sends, and its commit, first waits at a gate.
 * The scheduler lets one gate open at a time and waits until the database is quiet again: every
 * side is at its next gate, finished, or waiting on a lock (pg_stat_activity says so). A side
 * waiting on a lock cannot be chosen; the other one runs. So each run follows one interleaving of
 * the two transactions' statements that PostgreSQL allows, and a depth-first search over the
 * choices (`interleavings`) runs every one of them.
 */

/** Which side of a pair a statement belongs to: set by {@link Scheduler.run} for each side. */
const side = new AsyncLocalStorage<Side>();

interface Side {
  readonly name: string;
  /** Waiting at a gate (before `at`), running a statement, or finished. */
  state: 'gate' | 'running' | 'done';
  at: string;
  open?: () => void;
}

/** Awaited before each statement and commit: a no-op outside a scheduled pair. */
export async function gate(what: string): Promise<void> {
  const current = side.getStore();
  if (!current) return;
  // A side is one flow of statements: two of its own at once would wait for each other's turn.
  if (current.state === 'gate') throw new Error(`${current.name} ran two statements at once: ${current.at}, ${what}`);
  current.state = 'gate';
  current.at = what;
  await new Promise<void>((open) => (current.open = open));
  current.state = 'running';
}

/** A point where both sides could go: who could, and who went. */
export interface Choice {
  readonly enabled: readonly string[];
  readonly chosen: string;
}

/** One statement let go, as a counterexample prints it: `side: statement`. */
export type Trace = string[];

export class Scheduler {
  readonly #watch: pg.Client;

  private constructor(watch: pg.Client) {
    this.#watch = watch;
  }

  /** A scheduler watching `databaseUrl`'s sessions for lock waits. */
  static async on(databaseUrl: string): Promise<Scheduler> {
    const watch = new pg.Client({ connectionString: databaseUrl });
    // An abandoned run drops its database under it (explore.ts): the end of this session is expected.
    watch.on('error', () => {});
    await watch.connect();
    return new Scheduler(watch);
  }

  close(): Promise<void> {
    return this.#watch.end();
  }

  /**
   * Runs `sides` (name → work) together, a statement at a time: at each point where more than one
   * side waits at a gate, the next of `choose` is taken (the first side when `choose` runs out).
   * Returns the choices made, the statements in the order they ran, and each side's result.
   */
  async run(
    sides: Readonly<Record<string, () => Promise<unknown>>>,
    choose: readonly string[] = [],
  ): Promise<{ choices: Choice[]; trace: Trace; results: Record<string, PromiseSettledResult<unknown>> }> {
    const states = Object.keys(sides).map((name): Side => ({ name, state: 'running', at: 'start' }));
    const results: Record<string, PromiseSettledResult<unknown>> = {};
    const finished = states.map((s) =>
      side
        .run(s, () => sides[s.name]!())
        .then(
          (value) => (results[s.name] = { status: 'fulfilled', value }),
          (reason: unknown) => (results[s.name] = { status: 'rejected', reason }),
        )
        .finally(() => (s.state = 'done')),
    );
    const choices: Choice[] = [];
    const trace: Trace = [];
    for (;;) {
      await this.#quiet(states);
      const enabled = states.filter((s) => s.state === 'gate');
      if (enabled.length === 0) {
        if (states.every((s) => s.state === 'done')) break;
        // Every side left waits on a lock: PostgreSQL's deadlock detector ends one of them.
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      let next = enabled[0]!;
      if (enabled.length > 1) {
        const wanted = choose[choices.length];
        next = enabled.find((s) => s.name === wanted) ?? next;
        choices.push({ enabled: enabled.map((s) => s.name), chosen: next.name });
      }
      trace.push(`${next.name}: ${next.at}`);
      next.state = 'running';
      next.open!();
    }
    await Promise.all(finished);
    return { choices, trace, results };
  }

  /** Until no side is running a statement that is not waiting on a lock. */
  async #quiet(states: readonly Side[]): Promise<void> {
    for (let polls = 0; ; polls++) {
      await new Promise((resolve) => setImmediate(resolve));
      const running = states.filter((s) => s.state === 'running').length;
      if (running === 0) return;
      if (polls > 2) {
        const { rows } = await this.#watch.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
        );
        if ((rows[0]?.n ?? 0) >= running) return;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      if (polls > 20_000) throw new Error('a scheduled statement neither finished nor waited on a lock');
    }
  }
}

/**
 * Every interleaving of `sides` that PostgreSQL allows, depth first: runs the first, then for each
 * choice point not yet tried the other way, the run that takes it (`run(prefix)` must set up a
 * fresh state each time). Yields each run's result.
 */
export async function* interleavings<R extends { choices: Choice[] }>(
  run: (prefix: readonly string[]) => Promise<R>,
): AsyncGenerator<R> {
  const pending: string[][] = [[]];
  while (pending.length > 0) {
    const prefix = pending.pop()!;
    const result = await run(prefix);
    for (let i = result.choices.length - 1; i >= prefix.length; i--) {
      const { enabled, chosen } = result.choices[i]!;
      const taken = result.choices.slice(0, i).map((c) => c.chosen);
      for (const other of enabled) if (other !== chosen) pending.push([...taken, other]);
    }
    yield result;
  }
}

/**
 * `client` with {@link gate} awaited before each statement: its raw queries, its model calls, its
 * interactive transactions' statements and their commits.
 */
export function gated<T extends object>(client: T): T {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || property.startsWith('_')) return value;
      if (property === '$transaction' && typeof value === 'function') {
        return (work: unknown, options?: unknown) => {
          if (typeof work !== 'function') return Reflect.apply(value, target, [work, options]);
          return Reflect.apply(value, target, [
            async (tx: object) => {
              const result: unknown = await (work as (tx: object) => Promise<unknown>)(gated(tx));
              await gate('COMMIT');
              return result;
            },
            options,
          ]);
        };
      }
      if (typeof value === 'function' && /^\$(query|execute)Raw/.test(property))
        return statement(target, value as Method, property);
      if (typeof value === 'object' && value !== null && !property.startsWith('$')) {
        return new Proxy(value, {
          get: (model, name, inner) => {
            const method: unknown = Reflect.get(model, name, inner);
            return typeof method === 'function' && typeof name === 'string'
              ? statement(model, method as Method, `${property}.${name}`)
              : method;
          },
        });
      }
      return value;
    },
  });
}

type Method = (...args: unknown[]) => unknown;

function statement(target: object, fn: Method, name: string) {
  return async (...args: unknown[]) => {
    await gate(describe(name, args[0]));
    return Reflect.apply(fn, target, args) as unknown;
  };
}

/** A statement as a counterexample prints it: its first words, or the call's name. */
function describe(name: string, first: unknown): string {
  const text =
    Array.isArray(first) && 'raw' in first
      ? (first as unknown as TemplateStringsArray).join('?')
      : typeof first === 'object' && first !== null && 'strings' in first
        ? (first as { strings: string[] }).strings.join('?')
        : typeof first === 'string'
          ? first
          : '';
  const words = text.replace(/\s+/g, ' ').trim();
  return words ? words.slice(0, 90).trimEnd() : name;
}
