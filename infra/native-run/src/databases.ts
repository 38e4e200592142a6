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

/**
 * The teaching console's two roles, as infra/postgres/init.sh makes them for compose: `reader`
 * reads every service's database and writes none; `scratch` may create databases — its lessons'
 * and its explorer's, which it owns and drops — and reaches no other. Neither is a superuser. The
 * same names on every system of a server, like the services' roles.
 */
export const CONSOLE_ROLES = { reader: 'console', scratch: 'lessons' } as const;

/**
 * What infra/postgres/init.sh does for the console, on the developer's own server as its
 * superuser: its roles, whatever they were made with before (a role of the same name that could
 * do more is brought down to this), `reader` a member of pg_read_all_data with CONNECT on each
 * of `databaseUrls` (migrate revokes it from everyone else). Idempotent, and one system at a
 * time on a server (an advisory lock): two systems starting at once share the roles.
 */
export async function provisionConsoleRoles(
  serverUrl: string,
  databaseUrls: readonly string[],
  roles: { readonly reader: string; readonly scratch: string } = CONSOLE_ROLES,
): Promise<void> {
  const server = new URL(serverUrl);
  server.pathname = '/postgres';
  const reader = pg.escapeIdentifier(roles.reader);
  const scratch = pg.escapeIdentifier(roles.scratch);
  await asSuperuser(server.toString(), async (client) => {
    await client.query(`SELECT pg_advisory_lock(hashtext('idem native run: the console''s roles'))`);
    try {
      for (const role of [reader, scratch])
        await client.query(`CREATE ROLE ${role} LOGIN`).catch(ignore('42710', '23505'));
      await client.query(`ALTER ROLE ${reader} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`);
      await client.query(`ALTER ROLE ${scratch} LOGIN NOSUPERUSER CREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`);
      await client.query(`GRANT pg_read_all_data TO ${reader}`);
      for (const url of databaseUrls) {
        const database = pg.escapeIdentifier(decodeURIComponent(new URL(url).pathname.slice(1)));
        await client.query(`GRANT CONNECT ON DATABASE ${database} TO ${reader}`);
      }
    } finally {
      await client.query(`SELECT pg_advisory_unlock(hashtext('idem native run: the console''s roles'))`);
    }
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
