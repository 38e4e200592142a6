import type { getDMMF } from '@prisma/get-dmmf';
import pg from 'pg';

/**
 * Compares a migrated database with the data model a Prisma schema declares: every model's
 * table; its columns' names, types and nullability; its primary key, unique constraints and
 * indexes (with their names, which the inbox relies on to recognise its own conflicts).
 * Returns one line per difference; none means the hand-written migrations match the schema.
 *
 * A check for tests and CI: it reads the schema with `@prisma/get-dmmf`, an optional peer
 * dependency that only a caller of this function installs.
 */
export async function findSchemaDrift(databaseUrl: string, schema: string): Promise<string[]> {
  const expected = expectedTables(await datamodelOf(schema));
  const actual = await readTables(databaseUrl);
  const drift: string[] = [];

  for (const [table, want] of expected) {
    const have = actual.get(table);
    if (!have) {
      drift.push(`table ${table}: declared in the schema, missing in the database`);
      continue;
    }
    for (const [column, type] of want.columns) {
      const found = have.columns.get(column);
      if (found === undefined) drift.push(`column ${table}.${column}: declared as ${type}, missing in the database`);
      else if (found !== type) drift.push(`column ${table}.${column}: schema says ${type}, database has ${found}`);
    }
    for (const [column, type] of have.columns) {
      if (!want.columns.has(column))
        drift.push(`column ${table}.${column}: ${type} in the database, not in the schema`);
    }
    for (const index of want.indexes) {
      if (!have.indexes.has(index)) drift.push(`${table}: ${index} declared in the schema, missing in the database`);
    }
    for (const index of have.indexes) {
      if (!want.indexes.has(index)) drift.push(`${table}: ${index} in the database, not in the schema`);
    }
  }
  for (const table of actual.keys()) {
    if (!expected.has(table)) drift.push(`table ${table}: in the database, not in the schema`);
  }
  return drift;
}

interface TableShape {
  /** column name → `type [not null]` */
  readonly columns: Map<string, string>;
  /** `primary key|unique|index <name> (<columns>)` */
  readonly indexes: Set<string>;
}

type Datamodel = Extract<ReturnType<typeof getDMMF>, { datamodel: unknown }>['datamodel'];

async function datamodelOf(schema: string): Promise<Datamodel> {
  const { getDMMF: parse } = await import('@prisma/get-dmmf').catch((error: unknown) => {
    throw new Error('findSchemaDrift needs @prisma/get-dmmf: add it to your development dependencies', {
      cause: error,
    });
  });
  const dmmf = parse({ datamodel: schema });
  if ('type' in dmmf) throw new Error(`the Prisma schema does not parse: ${dmmf.reason}`, { cause: dmmf.error });
  return dmmf.datamodel;
}

function expectedTables({ models, enums, indexes }: Datamodel): Map<string, TableShape> {
  const enumNames = new Map(enums.map((e) => [e.name, e.dbName ?? e.name]));
  const tables = new Map<string, TableShape>();

  for (const model of models) {
    const table = model.dbName ?? model.name;
    const columnOf = new Map(model.fields.map((field) => [field.name, field.dbName ?? field.name]));
    const columns = new Map<string, string>();
    for (const field of model.fields) {
      if (field.kind === 'object') continue;
      const type = field.kind === 'enum' ? enumNames.get(field.type)! : columnType(field.type, field.nativeType);
      columns.set(field.dbName ?? field.name, `${type}${field.isRequired ? ' not null' : ''}`);
    }
    const modelIndexes = new Set(
      indexes
        .filter((index) => index.model === model.name && index.type !== 'fulltext')
        .map((index) => {
          const cols = index.fields.map((f) => columnOf.get(f.name) ?? f.name);
          const kind = index.type === 'id' ? 'primary key' : index.type === 'unique' ? 'unique' : 'index';
          const suffix =
            index.type === 'id' ? 'pkey' : index.type === 'unique' ? `${cols.join('_')}_key` : `${cols.join('_')}_idx`;
          return `${kind} ${index.dbName ?? `${table}_${suffix}`} (${cols.join(', ')})`;
        }),
    );
    tables.set(table, { columns, indexes: modelIndexes });
  }
  return tables;
}

/** The PostgreSQL column type Prisma maps a scalar (and its native type attribute) to. */
function columnType(scalar: string, nativeType: readonly [string, readonly string[]] | null | undefined): string {
  if (nativeType) {
    const [name, args] = nativeType;
    const native: Record<string, string> = {
      Uuid: 'uuid',
      Text: 'text',
      VarChar: `varchar(${args[0]})`,
      Char: `char(${args[0]})`,
      Integer: 'integer',
      SmallInt: 'smallint',
      BigInt: 'bigint',
      Boolean: 'boolean',
      Timestamptz: `timestamptz(${args[0] ?? 3})`,
      Timestamp: `timestamp(${args[0] ?? 3})`,
      Date: 'date',
      JsonB: 'jsonb',
      Json: 'json',
      DoublePrecision: 'double precision',
      Decimal: `numeric(${args.join(',') || '65,30'})`,
      ByteA: 'bytea',
    };
    const type = native[name];
    if (!type) throw new Error(`schema drift check: native type @db.${name} is not mapped yet`);
    return type;
  }
  const defaults: Record<string, string> = {
    String: 'text',
    Int: 'integer',
    BigInt: 'bigint',
    Boolean: 'boolean',
    DateTime: 'timestamp(3)',
    Json: 'jsonb',
    Float: 'double precision',
    Decimal: 'numeric(65,30)',
    Bytes: 'bytea',
  };
  const type = defaults[scalar];
  if (!type) throw new Error(`schema drift check: scalar ${scalar} is not mapped yet`);
  return type;
}

/** The tables as the database has them; a partition is its parent's storage, not a table of the schema. */
async function readTables(databaseUrl: string): Promise<Map<string, TableShape>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const columns = await client.query<{
      table_name: string;
      column_name: string;
      is_nullable: 'YES' | 'NO';
      udt_name: string;
      character_maximum_length: number | null;
      datetime_precision: number | null;
      numeric_precision: number | null;
      numeric_scale: number | null;
    }>(
      `SELECT table_name, column_name, is_nullable, udt_name, character_maximum_length,
              datetime_precision, numeric_precision, numeric_scale
         FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name <> '_prisma_migrations'
          AND table_name NOT IN (SELECT relname FROM pg_class WHERE relispartition)`,
    );
    const indexes = await client.query<{ table_name: string; index_name: string; kind: string; columns: string[] }>(
      `SELECT t.relname AS table_name, i.relname AS index_name,
              CASE WHEN x.indisprimary THEN 'primary key' WHEN x.indisunique THEN 'unique' ELSE 'index' END AS kind,
              array_agg(a.attname::text ORDER BY k.ordinality) AS columns
         FROM pg_index x
         JOIN pg_class i ON i.oid = x.indexrelid
         JOIN pg_class t ON t.oid = x.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ordinality)
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
        WHERE n.nspname = 'public' AND t.relname <> '_prisma_migrations' AND NOT t.relispartition
        GROUP BY t.relname, i.relname, x.indisprimary, x.indisunique`,
    );
    const tables = new Map<string, TableShape>();
    const tableOf = (name: string) => {
      let table = tables.get(name);
      if (!table) tables.set(name, (table = { columns: new Map(), indexes: new Set() }));
      return table;
    };
    for (const c of columns.rows) {
      tableOf(c.table_name).columns.set(c.column_name, `${pgType(c)}${c.is_nullable === 'NO' ? ' not null' : ''}`);
    }
    for (const ix of indexes.rows) {
      tableOf(ix.table_name).indexes.add(`${ix.kind} ${ix.index_name} (${ix.columns.join(', ')})`);
    }
    return tables;
  } finally {
    await client.end();
  }
}

function pgType(c: {
  udt_name: string;
  character_maximum_length: number | null;
  datetime_precision: number | null;
  numeric_precision: number | null;
  numeric_scale: number | null;
}): string {
  switch (c.udt_name) {
    case 'int2':
      return 'smallint';
    case 'int4':
      return 'integer';
    case 'int8':
      return 'bigint';
    case 'bool':
      return 'boolean';
    case 'float8':
      return 'double precision';
    case 'varchar':
      return `varchar(${c.character_maximum_length})`;
    case 'bpchar':
      return `char(${c.character_maximum_length})`;
    case 'timestamptz':
      return `timestamptz(${c.datetime_precision})`;
    case 'timestamp':
      return `timestamp(${c.datetime_precision})`;
    case 'numeric':
      return `numeric(${c.numeric_precision},${c.numeric_scale})`;
    default:
      return c.udt_name;
  }
}
