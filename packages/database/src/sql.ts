import type { SqlClient } from './sql-client.js';

/**
 * A piece of SQL with its parameters, to be put together with others and run as one statement:
 * what lets a handler's write and the inbox's record travel in one round trip (@idem/inbox
 * one-statement.ts). Made with the {@link sql} tag; a piece among another's values is spliced in
 * with its parameters still parameters, so no value ever becomes SQL text.
 */
export class Sql {
  /** @internal */
  constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}
}

/** A piece of SQL: `sql\`UPDATE t SET n = ${n} WHERE id = ${id}\``, pieces nested as values. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  const text = [strings[0]!];
  const parameters: unknown[] = [];
  values.forEach((value, i) => {
    if (value instanceof Sql) {
      text[text.length - 1] += value.strings[0]!;
      text.push(...value.strings.slice(1));
      parameters.push(...value.values);
      text[text.length - 1] += strings[i + 1]!;
    } else {
      parameters.push(value);
      text.push(strings[i + 1]!);
    }
  });
  return new Sql(text, parameters);
}

/** A name (of a table, a column, a CTE) as SQL: only plain lower-case identifiers are taken. */
export function identifier(name: string): Sql {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`${JSON.stringify(name)} is not a plain SQL identifier`);
  return new Sql([name], []);
}

/** Runs `statement` on `db` (a client or a transaction) and returns its rows. */
export async function query<R>(db: SqlClient, statement: Sql): Promise<R[]> {
  return db.$queryRaw<R[]>(template(statement), ...statement.values);
}

/** Runs `statement` on `db` (a client or a transaction) and returns how many rows it wrote. */
export async function execute(db: SqlClient, statement: Sql): Promise<number> {
  return db.$executeRaw(template(statement), ...statement.values);
}

const template = ({ strings }: Sql) =>
  Object.assign([...strings], { raw: [...strings] }) as unknown as TemplateStringsArray;
