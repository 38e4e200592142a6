import pg from 'pg';

/**
 * A service's two database roles: `owner` owns its database and migrates it (the role the
 * migrate entrypoint connects as), `runtime` is the role the service runs as, which may read and
 * write its tables and change none of them (the grants are migrate's: `runtimeRole`). The same
 * names in a native run, in compose (infra/postgres/init.sh) and in Kubernetes.
 */
export const databaseRolesOf = (service: string) => ({ owner: service, runtime: `${service}_runtime` });

/** `databaseUrl` as `role` (the native run's server trusts loopback: no password). */
export function asRole(databaseUrl: string, role: string): string {
  const url = new URL(databaseUrl);
  url.username = role;
  url.password = '';
  return url.toString();
}

/**
 * What infra/postgres/init.sh does for compose, done on the developer's own server as its
 * superuser: a service's two roles and its database, owned by the migrating role. A database
 * from before the roles were split (owned by the superuser) is handed over to that role, with
 * its tables and sequences, so its migrations and grants work on it. Idempotent, and safe for two
 * systems starting at once (the roles are shared: each database grants only its own).
 */
export async function provisionDatabase(databaseUrl: string, service: string): Promise<void> {
  const { owner, runtime } = databaseRolesOf(service);
  const database = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  const server = new URL(databaseUrl);
  server.pathname = '/postgres';
  await asSuperuser(server.toString(), async (client) => {
    for (const role of [owner, runtime]) {
      await client.query(`CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN`).catch(ignore('42710', '23505'));
    }
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    const name = pg.escapeIdentifier(database);
    if (exists.rowCount === 0) {
      await client.query(`CREATE DATABASE ${name} OWNER ${pg.escapeIdentifier(owner)}`).catch(ignore('42P04', '23505'));
    }
    await client.query(`ALTER DATABASE ${name} OWNER TO ${pg.escapeIdentifier(owner)}`);
  });
  await asSuperuser(databaseUrl, async (client) => {
    const { rows } = await client.query<{ kind: string; name: string }>(
      `SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END AS kind,
              format('%I.%I', n.nspname, c.relname) AS name
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'S')
          AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = $1)
          -- a sequence owned by a column moves with its table
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i') AND c.relkind = 'S')`,
      [owner],
    );
    for (const { kind, name } of rows)
      await client.query(`ALTER ${kind} ${name} OWNER TO ${pg.escapeIdentifier(owner)}`);
  });
}

async function asSuperuser(url: string, work: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end();
  }
}

/** Another system created it between our check and our CREATE: that is the goal. */
const ignore =
  (...codes: string[]) =>
  (error: { code?: string }) => {
    if (!codes.includes(error.code ?? '')) throw error;
  };
