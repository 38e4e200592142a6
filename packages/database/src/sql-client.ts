/**
 * What the inbox and the outbox need of a Prisma client: raw SQL and interactive transactions. Every
 * service's generated client (and its transaction client) satisfies these structurally, so
 * the inbox and the outbox work with any of them and each handler still receives its service's own `tx`.
 */
export interface SqlClient {
  $executeRaw(query: TemplateStringsArray, ...values: unknown[]): PromiseLike<number>;
  $queryRaw<T = unknown>(query: TemplateStringsArray, ...values: unknown[]): PromiseLike<T>;
}

/** How long a transaction may wait for a connection and run. */
export interface TransactionOptions {
  /** How long to wait for a connection from the pool. @defaultValue 2000 */
  readonly maxWait?: number;
  /** How long the whole transaction may take before it is rolled back. @defaultValue 5000 */
  readonly timeout?: number;
}

/** A {@link SqlClient} that can open an interactive transaction (a Prisma client is one). */
export interface TransactionalClient<Tx extends SqlClient> extends SqlClient {
  $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: TransactionOptions): Promise<R>;
}
