import pg from 'pg';
import { borrow } from './node-postgres.js';

/** A query inside {@link readOnly}: the rows it returns. */
export type ReadQuery = <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => Promise<R[]>;

/**
 * Runs `work` in one read-only transaction — a consistent snapshot that cannot write, how the
 * checker, the console and the tests look inside a service's database. `source` is a pool (a
 * connection is borrowed) or a URL (a connection is opened for the call).
 */
export async function readOnly<T>(source: pg.Pool | string, work: (query: ReadQuery) => Promise<T>): Promise<T> {
  const own = typeof source === 'string' ? new pg.Client({ connectionString: source }) : undefined;
  const client = own ?? (await (source as pg.Pool).connect());
  const borrowed = own ? undefined : borrow(client as pg.PoolClient);
  if (own) await own.connect();
  try {
    await client.query('BEGIN TRANSACTION READ ONLY');
    const result = await work(async (sql, params) => (await client.query(sql, params)).rows);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(borrowed?.broke ?? (() => {}));
    throw error;
  } finally {
    if (own) await own.end();
    else borrowed!.release();
  }
}
