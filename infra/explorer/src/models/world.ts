import { fileURLToPath } from 'node:url';
import type { SqlClient, TableSet, TransactionalClient } from '@idem/database';
import type { FaultName } from '@idem/faults';
import { createInbox, type Inbox } from '@idem/inbox';
import { createMigratedDatabase } from '@idem/testkit';
import { Clock, CrashSwitches } from '../model.js';
import { gated } from '../scheduler.js';

interface ServiceClient<Tx extends SqlClient> extends TransactionalClient<Tx> {
  $disconnect(): Promise<void>;
  $executeRawUnsafe(query: string): PromiseLike<number>;
}

/** What each model runs a service's steps in: its schema in a fresh database, a clock, the crash switches and the inbox. */
export interface World<Tx extends SqlClient, Client extends ServiceClient<Tx>> {
  readonly databaseUrl: string;
  /** The service's client, for set-up and checks: its statements are never scheduled. */
  readonly db: Client;
  /** The same client with a gate before each statement: what the steps run on. */
  readonly explored: Client;
  readonly clock: Clock;
  readonly switches: CrashSwitches;
  readonly inbox: Inbox<Tx>;
  /** Runs one step a minute after the last one; with `crashAt`, those fault switches armed. */
  step(work: () => Promise<unknown>, crashAt?: readonly FaultName[]): Promise<unknown>;
  /** Empties every table but the migrator's own and puts the clock back: a fresh start, schema kept. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

/** A world for `service` (its migrations and the packages' tables it includes), on the service's own client. */
export async function worldOf<Tx extends SqlClient, Client extends ServiceClient<Tx>>(
  service: string,
  tables: readonly TableSet[],
  connect: (url: string, poolMax: number) => Client,
): Promise<World<Tx, Client>> {
  const migrations = fileURLToPath(new URL(`../../../../services/${service}/prisma/migrations`, import.meta.url));
  const { url, drop } = await createMigratedDatabase(`explore_${service}`, migrations, tables);
  const db = connect(url, 4);
  const emptied = await tablesInDeleteOrder(db);
  const explored = gated(db);
  const clock = new Clock();
  const switches = new CrashSwitches();
  return {
    databaseUrl: url,
    db,
    explored,
    clock,
    switches,
    inbox: createInbox<Tx>({ db: explored, faults: switches, now: clock.now }),
    step(work, crashAt) {
      clock.advance();
      return crashAt ? switches.during(crashAt, work) : work();
    },
    async reset() {
      // DELETE rather than TRUNCATE (a schedule leaves a few rows, and TRUNCATE's new files cost
      // more), a table's rows before the rows they point at: no foreign key is ever broken, so
      // the role the explorer runs as needs no right to switch the checks off (a superuser's). One
      // statement: a prepared one holds one command.
      await db.$executeRawUnsafe(`DO $$ BEGIN ${emptied.map((table) => `DELETE FROM ${table};`).join(' ')} END $$`);
      clock.reset();
    },
    async close() {
      await db.$disconnect();
      await drop();
    },
  };
}

/**
 * Every table of the service but the migrator's own (the inbox's partitions are emptied through
 * their parent), each after the tables whose rows point at it: the order DELETE empties them in.
 */
async function tablesInDeleteOrder(db: SqlClient): Promise<string[]> {
  const rows = await db.$queryRaw<{ name: string; pointsAt: string[] }[]>`
    SELECT quote_ident(c.relname) AS name,
           ARRAY(SELECT quote_ident(r.relname) FROM pg_constraint f JOIN pg_class r ON r.oid = f.confrelid
                  WHERE f.conrelid = c.oid AND f.contype = 'f' AND f.confrelid <> c.oid) AS "pointsAt"
      FROM pg_class c
     WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       AND c.relname <> '_prisma_migrations'`;
  const left = new Map(rows.map((row) => [row.name, row.pointsAt]));
  const order: string[] = [];
  while (left.size > 0) {
    // A table no table still to empty points at can be emptied now.
    const free = [...left.keys()].filter((name) => ![...left.values()].some((pointsAt) => pointsAt.includes(name)));
    if (free.length === 0) throw new Error(`foreign keys in a cycle among ${[...left.keys()].join(', ')}`);
    for (const name of free) {
      order.push(name);
      left.delete(name);
    }
  }
  return order;
}
