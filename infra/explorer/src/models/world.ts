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
      const rows = await db.$queryRaw<{ name: string }[]>`
        SELECT quote_ident(tablename) AS name FROM pg_tables
         WHERE schemaname = 'public' AND tablename <> '_prisma_migrations' AND tablename NOT LIKE 'processed_messages_%'`;
      // DELETE rather than TRUNCATE (a schedule leaves a few rows, and TRUNCATE's new files cost
      // more), foreign keys not checked meanwhile (in this transaction only): every table is emptied.
      const deletes = rows.map((row) => `DELETE FROM ${row.name};`).join(' ');
      await db.$executeRawUnsafe(`DO $$ BEGIN SET LOCAL session_replication_role = replica; ${deletes} END $$`);
      clock.reset();
    },
    async close() {
      await db.$disconnect();
      await drop();
    },
  };
}
