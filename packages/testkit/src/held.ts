import type { SqlClient, TransactionalClient, TransactionOptions } from '@idem/database';

/** A handler whose transaction waits, part-way, until the test lets it go on. */
export interface HeldHandler<H> {
  readonly handler: H;
  /** Resolves once the transaction is held: its first `statements` statements ran, nothing after them has. */
  readonly reached: Promise<void>;
  release(): void;
}

/**
 * Wraps a handler `(message, tx) => …` so that its transaction stops after its first
 * `statements` statements (before the next one, or before the commit when there is none) until
 * `release()`: a test holds one handler between its read and its write while another message
 * about the same business key runs, making a race window happen every time instead of now and
 * then. Statements are the client's `$queryRaw` / `$executeRaw` calls and Prisma model calls.
 */
export function held<M, R, Tx extends object>(
  handler: (message: M, tx: Tx) => Promise<R>,
  { statements = 1 }: { statements?: number } = {},
): HeldHandler<(message: M, tx: Tx) => Promise<R>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let reach!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  const wrapped = async (message: M, tx: Tx): Promise<R> => {
    let count = 0;
    const gate = async () => {
      if (count++ !== statements) return;
      reach();
      await released;
    };
    const result = await handler(message, gated(tx, gate));
    if (count <= statements) {
      count = statements;
      await gate();
    }
    return result;
  };
  return { handler: wrapped, reached, release };
}

/**
 * `db` for code that opens its own transaction (an HTTP use case, a worker's record) rather than
 * receiving the inbox's: each transaction it opens is held as {@link held} holds a handler's,
 * after its first `statements` statements or before its commit.
 */
export function heldTransactions<C extends TransactionalClient<SqlClient>>(
  db: C,
  options: { statements?: number } = {},
): HeldHandler<C> {
  const holding = held((work: (tx: SqlClient) => Promise<unknown>, tx: SqlClient) => work(tx), options);
  const holdingDb = {
    $transaction: (work: (tx: SqlClient) => Promise<unknown>, transaction?: TransactionOptions) =>
      db.$transaction((tx) => holding.handler(work, tx), transaction),
  } as unknown as C;
  return { handler: holdingDb, reached: holding.reached, release: holding.release };
}

/** `client`, with `gate` awaited before each statement it runs. */
function gated<T extends object>(client: T, gate: () => Promise<void>): T {
  const call =
    (target: object, fn: (...args: unknown[]) => unknown) =>
    async (...args: unknown[]) => {
      await gate();
      return Reflect.apply(fn, target, args);
    };
  return new Proxy(client, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string') return value;
      if (typeof value === 'function' && property.startsWith('$query')) return call(target, value as never);
      if (typeof value === 'function' && property.startsWith('$execute')) return call(target, value as never);
      // A Prisma model delegate (`tx.paymentAttempt`): each of its calls is a statement.
      if (typeof value === 'object' && value !== null && !property.startsWith('$') && !property.startsWith('_')) {
        return new Proxy(value, {
          get: (model, name, inner) => {
            const method: unknown = Reflect.get(model, name, inner);
            return typeof method === 'function' ? call(model, method as never) : method;
          },
        });
      }
      return value;
    },
  });
}

/**
 * Resolves once `other` has ended (resolved or rejected) or a session of `db`'s database waits on a lock: the other
 * transaction of a race either ran to its end or is queued behind the held one.
 */
export async function finishedOrWaiting(db: SqlClient, other: Promise<unknown>, timeoutMs = 10_000): Promise<void> {
  let done = false;
  void other.then(
    () => (done = true),
    () => (done = true),
  );
  const deadline = Date.now() + timeoutMs;
  while (!done) {
    const [waiting] = await db.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    if ((waiting?.n ?? 0) > 0) return;
    if (Date.now() > deadline) throw new Error(`neither finished nor waiting on a lock after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
