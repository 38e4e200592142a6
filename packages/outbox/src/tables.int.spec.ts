import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dropDatabase, findSchemaDrift, migrate, packageModels, readOnly } from '@idem/database';
import { inboxTables } from '@idem/inbox';
import { postgresServerUrl, uniqueName } from '@idem/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { outboxTables } from './tables.js';

// A service database from before the packages owned their tables: its own first migration
// created processed_messages, dead_letters and outbox_messages (the SQL every service had).
const BEFORE = `CREATE TABLE "processed_messages" ("consumer" TEXT NOT NULL, "message_id" UUID NOT NULL,
  "body_hash" CHAR(64) NOT NULL, "processed_at" TIMESTAMPTZ(6) NOT NULL,
  CONSTRAINT "processed_messages_pkey" PRIMARY KEY ("consumer","message_id"));
CREATE INDEX "processed_messages_processed_at_idx" ON "processed_messages"("processed_at");
CREATE TABLE "dead_letters" ("consumer" TEXT NOT NULL, "message_id" TEXT NOT NULL, "payload" JSONB NOT NULL,
  "code" TEXT NOT NULL, "reason" VARCHAR(500) NOT NULL, "attempts" INTEGER NOT NULL,
  "dead_lettered_at" TIMESTAMPTZ(6) NOT NULL, "replayed_at" TIMESTAMPTZ(6), "replay_count" INTEGER NOT NULL DEFAULT 0,
  CONSTRAINT "dead_letters_pkey" PRIMARY KEY ("consumer","message_id"));
CREATE INDEX "dead_letters_dead_lettered_at_idx" ON "dead_letters"("dead_lettered_at");
CREATE TABLE "outbox_messages" ("message_id" UUID NOT NULL, "position" BIGSERIAL NOT NULL, "type" TEXT NOT NULL,
  "envelope" JSONB NOT NULL, "created_at" TIMESTAMPTZ(6) NOT NULL, "published_at" TIMESTAMPTZ(6),
  "attempts" INTEGER NOT NULL DEFAULT 0, "next_attempt_at" TIMESTAMPTZ(6) NOT NULL, "last_error" VARCHAR(500),
  CONSTRAINT "outbox_messages_pkey" PRIMARY KEY ("message_id"));
CREATE INDEX "outbox_messages_published_at_position_idx" ON "outbox_messages"("published_at", "position");
INSERT INTO processed_messages VALUES ('c', gen_random_uuid(), repeat('0', 64), now());`;

const urls: string[] = [];
afterAll(() => Promise.all(urls.map((url) => dropDatabase(url))));
const SCHEMA = 'datasource db {\n  provider = "postgresql"\n}\n';

describe('the tables the inbox and the outbox own', () => {
  it('migrate a new database to exactly their Prisma models', async () => {
    const url = `${postgresServerUrl}/${uniqueName('idem_test_tables_new')}`;
    urls.push(url);
    const empty = mkdtempSync(join(tmpdir(), 'idem-migrations-'));
    const include = [inboxTables, outboxTables];
    expect(await migrate({ databaseUrl: url, migrationsDir: empty, include })).toEqual([
      '20261130000000_idem_inbox',
      '20261130000000_idem_outbox',
      '20261204000000_idem_inbox_dead_letter_text',
      '20261207000000_idem_inbox_partitions',
      '20261208000000_idem_inbox_search_path',
      '20261209000000_idem_inbox_dead_letter_job_id',
      '20261210000000_idem_inbox_dead_letter_broker_id',
    ]);
    expect(await findSchemaDrift(url, `${SCHEMA}${packageModels(include)}`)).toEqual([]);
  });

  it('are adopted by a database whose own first migration made them, keeping its rows', async () => {
    const url = `${postgresServerUrl}/${uniqueName('idem_test_tables_adopt')}`;
    urls.push(url);
    const old = mkdtempSync(join(tmpdir(), 'idem-migrations-'));
    mkdirSync(join(old, '20261130000000_init'));
    writeFileSync(join(old, '20261130000000_init', 'migration.sql'), BEFORE);
    await migrate({ databaseUrl: url, migrationsDir: old });
    // The release where the packages own them: the service's init is gone, theirs come in.
    const now = mkdtempSync(join(tmpdir(), 'idem-migrations-'));
    const include = [inboxTables, outboxTables];
    expect(await migrate({ databaseUrl: url, migrationsDir: now, include })).toHaveLength(7);
    expect(await findSchemaDrift(url, `${SCHEMA}${packageModels(include)}`)).toEqual([]);
    expect(await migrate({ databaseUrl: url, migrationsDir: now, include })).toEqual([]);
    const rows = await readOnly(url, (query) =>
      query<{ n: number }>('SELECT count(*)::int AS n FROM processed_messages'),
    );
    expect(rows).toEqual([{ n: 1 }]);
  });
});
