/**
 * Work that runs in the process that committed a transaction, right after its commit and never
 * after a rollback: the outbox hands its events to the broker this way, and a worker takes the
 * item a transaction just wrote for it. A client made by {@link runningAfterCommit} runs it; in a
 * transaction of any other client {@link afterCommit} says no and the caller does without (the
 * relay, or the worker's poll, then finds the rows). Nothing here is durable: a crash after the
 * commit loses the work, so what it does must also be found again from the rows.
 */
import type { SqlClient, TransactionalClient } from './sql-client.js';

interface Committing {
  /** The client whose transaction this is. */
  readonly client: object;
  readonly work: (() => void)[];
}

const transactions = new WeakMap<object, Committing>();

type Method = (...args: unknown[]) => unknown;

/**
 * Runs `work` right after `tx` commits. Returns false, and runs nothing, when `tx` is not a
 * transaction of a client made by {@link runningAfterCommit}. `work` must not throw: it runs after
 * the caller's transaction succeeded, and reports its own failures.
 */
export function afterCommit(tx: object, work: () => void): boolean {
  const committing = transactions.get(tx);
  committing?.work.push(work);
  return committing !== undefined;
}

/** The client `tx` is a transaction of, when that client runs work after commit. */
export const clientOf = (tx: object): object | undefined => transactions.get(tx)?.client;

/**
 * `db`, whose interactive transactions run the work {@link afterCommit} gave them once they
 * commit. Everything else is `db`'s own.
 */
export function runningAfterCommit<C extends TransactionalClient<SqlClient>>(db: C): C {
  // `db`'s methods bound to it once each, not on every call (`db.$queryRaw` is on the hot path).
  const bound = new Map<PropertyKey, { readonly method: Method; readonly bound: Method }>();
  const client: C = new Proxy(db, {
    get(target, property) {
      if (property === '$transaction') return transaction;
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      let entry = bound.get(property);
      if (entry?.method !== value)
        bound.set(property, (entry = { method: value as Method, bound: value.bind(target) }));
      return entry.bound;
    },
  });
  async function transaction<R>(fn: (tx: SqlClient) => Promise<R>, options?: object): Promise<R> {
    if (typeof fn !== 'function') return db.$transaction(fn, options); // Prisma's array form: nothing to run after
    let work: (() => void)[] = [];
    const result = await db.$transaction(async (tx) => {
      work = [];
      transactions.set(tx, { client, work });
      return fn(tx);
    }, options);
    for (const run of work) {
      try {
        run();
      } catch (error) {
        process.emitWarning(`work after commit failed: ${(error as Error)?.message ?? String(error)}`);
      }
    }
    return result;
  }
  return client;
}
