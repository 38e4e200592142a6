import pg from 'pg';
import type { UnsafeSqlClient } from './leases.js';
import { preparedStatementNames, type StatementNames } from './prepared-statements.js';
import type { TransactionalClient, TransactionOptions } from './sql-client.js';

/** A node-postgres connection inside one transaction, as the inbox and the outbox use it. */
export interface PgTransaction extends UnsafeSqlClient {
  /** The connection itself, for the handler's own queries. */
  readonly client: pg.PoolClient;
}

/** The pool, as a {@link TransactionalClient}: the inbox and the outbox run on it as on Prisma. */
export interface PgDatabase extends TransactionalClient<PgTransaction>, UnsafeSqlClient {
  readonly pool: pg.Pool;
  $disconnect(): Promise<void>;
}

/** Raised when a transaction outlives its `timeout` (it is rolled back) or waits too long for a connection. */
export class TransactionTimeoutError extends Error {
  /** Prisma's code for the same case, so failure classification treats both alike (transient). */
  readonly code = 'P2028';
}

/**
 * The inbox and the outbox on a plain node-postgres pool instead of Prisma: tagged SQL
 * becomes a parameterised query (`$1`, `$2`, …), prepared under the name `names` gives its text
 * (prepared-statements.ts), and `$transaction` checks a connection out,
 * runs BEGIN, the function, then COMMIT — or ROLLBACK on any error, which it rethrows as
 * node-postgres raised it (SQLSTATE and constraint intact, which the inbox's duplicate
 * detection reads). The same guarantees as with Prisma, without its query engine in the way.
 */
export function fromNodePostgres(pool: pg.Pool, names: StatementNames = preparedStatementNames()): PgDatabase {
  survivesDisconnects(pool);
  const outside = sqlOn((text, values) => pool.query({ name: names(text), text, values }));
  return {
    pool,
    ...outside,
    async $transaction<R>(
      fn: (tx: PgTransaction) => Promise<R>,
      { maxWait = 2000, timeout = 5000 }: TransactionOptions = {},
    ): Promise<R> {
      const client = await withTimeout(pool.connect(), maxWait, 'no connection became free');
      const borrowed = borrow(client);
      let expired = false;
      // Past the timeout, what the function sends next fails and the transaction rolls back.
      const timer = setTimeout(() => (expired = true), timeout);
      const inside = sqlOn(async (text, values) => {
        if (expired) throw new TransactionTimeoutError(`the transaction ran longer than ${timeout} ms`);
        return client.query({ name: names(text), text, values });
      });
      try {
        await client.query('BEGIN');
        const result = await fn({ client, ...inside });
        if (expired) throw new TransactionTimeoutError(`the transaction ran longer than ${timeout} ms`);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(borrowed.broke);
        throw error;
      } finally {
        clearTimeout(timer);
        borrowed.release();
      }
    },
    $disconnect: () => pool.end(),
  };
}

/** A node-postgres pool that outlives its server's restarts: see {@link survivesDisconnects}. */
export function createPool(config: pg.PoolConfig): pg.Pool {
  return survivesDisconnects(new pg.Pool(config));
}

/**
 * A connection the server closes while idle (a restart, a terminated backend) or while the pool
 * is discarding it raises an error with no query to fail: the pool drops it and the next query
 * connects anew. Unheard, that error would end the process.
 */
function survivesDisconnects(pool: pg.Pool): pg.Pool {
  pool.on('error', () => {});
  pool.on('remove', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * A connection lent out of its pool, which stops hearing its errors meanwhile: the server ending it
 * between two statements (a restart while the relay awaits the broker) is heard here instead — the
 * next statement fails — and `release` destroys it rather than lend it again.
 */
export function borrow(client: pg.PoolClient): { broke: (error: Error) => void; release: () => void } {
  let broken: Error | undefined;
  const broke = (error: Error) => void (broken ??= error);
  client.on('error', broke);
  return {
    broke,
    release() {
      client.removeListener('error', broke);
      client.release(broken);
    },
  };
}

function sqlOn(query: (text: string, values: unknown[]) => Promise<pg.QueryResult>): UnsafeSqlClient {
  return {
    async $queryRawUnsafe<T>(text: string, ...values: unknown[]) {
      return (await query(text, values)).rows as T;
    },
    async $queryRaw<T>(strings: TemplateStringsArray, ...values: unknown[]) {
      return (await query(textOf(strings), values)).rows as T;
    },
    async $executeRaw(strings: TemplateStringsArray, ...values: unknown[]) {
      return (await query(textOf(strings), values)).rowCount ?? 0;
    },
  };
}

/** `a ${x} b ${y}` → `a $1 b $2`. */
const textOf = (strings: TemplateStringsArray) => strings.reduce((sql, part, i) => `${sql}$${i}${part}`);

/** The pool's connection within `ms`; one that arrives after that goes straight back to the pool. */
async function withTimeout(connecting: Promise<pg.PoolClient>, ms: number, what: string): Promise<pg.PoolClient> {
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new TransactionTimeoutError(`${what} within ${ms} ms`));
    }, ms);
  });
  void connecting.then(
    (client) => timedOut && client.release(),
    () => {},
  );
  try {
    return await Promise.race([connecting, late]);
  } finally {
    clearTimeout(timer);
  }
}
