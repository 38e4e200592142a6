/**
 * Prepared statements: a statement sent under a name is parsed and planned once on each
 * connection, then only bound and run. The services' statements are few and repeated — the
 * inbox's record, an order's one statement, a lease's claim — so PostgreSQL stops parsing and
 * planning the same text thousands of times a minute (docs/performance.md: about a third of
 * its CPU per order).
 *
 * A name stands for one text, and each connection keeps what it prepared until it closes; once
 * `max` texts have names, another is sent unnamed (parsed and planned each time, as before), so
 * code that writes endless texts cannot fill the server's memory. Behind a connection pooler in
 * transaction mode, the pooler must keep prepared statements (PgBouncer ≥ 1.21 with
 * `max_prepared_statements`); behind another, name nothing: `preparedStatementNames(0)`.
 */
export type StatementNames = (text: string) => string;

/** A namer for one pool: `idem_1`, `idem_2`, … for each new text, '' (unnamed) past `max` of them. */
export function preparedStatementNames(max = 256): StatementNames {
  const names = new Map<string, string>();
  return (text) => {
    let name = names.get(text);
    if (name === undefined && names.size < max) names.set(text, (name = `idem_${names.size + 1}`));
    return name ?? '';
  };
}

/**
 * Prisma's pg adapter preparing its statements (raw ones included):
 * `new PrismaPg(config, preparingStatements())`.
 */
export function preparingStatements(names: StatementNames = preparedStatementNames()): {
  statementNameGenerator: (query: { readonly sql: string }) => string;
} {
  return { statementNameGenerator: (query) => names(query.sql) };
}
