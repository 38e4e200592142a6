import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropDatabase, migrate } from './migrate.js';
import { findSchemaDrift } from './schema-drift.js';

const server = process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432';
const url = `${server}/idem_test_drift_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;

const schema = (extraField = '') => `
datasource db {
  provider = "postgresql"
}

model ProcessedMessage {
  consumer    String
  messageId   String   @map("message_id") @db.Uuid
  processedAt DateTime @map("processed_at") @db.Timestamptz(6)
  note        String?${extraField}

  @@id([consumer, messageId])
  @@index([processedAt])
  @@map("processed_messages")
}

model Item {
  id    Int    @id @default(autoincrement())
  code  String @unique @db.VarChar(20)
  price BigInt
}
`;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'idem-drift-'));
  mkdirSync(join(dir, '20260101000000_init'));
  writeFileSync(
    join(dir, '20260101000000_init', 'migration.sql'),
    `CREATE TABLE "processed_messages" (
       "consumer" TEXT NOT NULL,
       "message_id" UUID NOT NULL,
       "processed_at" TIMESTAMPTZ(6) NOT NULL,
       "note" TEXT,
       CONSTRAINT "processed_messages_pkey" PRIMARY KEY ("consumer","message_id")
     );
     CREATE INDEX "processed_messages_processed_at_idx" ON "processed_messages"("processed_at");
     CREATE TABLE "Item" ("id" SERIAL NOT NULL, "code" VARCHAR(20) NOT NULL, "price" BIGINT NOT NULL,
       CONSTRAINT "Item_pkey" PRIMARY KEY ("id"));
     CREATE UNIQUE INDEX "Item_code_key" ON "Item"("code");`,
  );
  await migrate({ databaseUrl: url, migrationsDir: dir });
});

afterAll(() => dropDatabase(url));

describe('findSchemaDrift', () => {
  it('finds nothing when the migrations match the schema', async () => {
    expect(await findSchemaDrift(url, schema())).toEqual([]);
  });

  it('reports a column added to the schema but not to a migration', async () => {
    const drift = await findSchemaDrift(url, schema('\n  retries     Int'));
    expect(drift).toEqual(['column processed_messages.retries: declared as integer not null, missing in the database']);
  });

  it('reports a changed type, nullability, unique constraint and index', async () => {
    const changed = schema()
      .replace('note        String?', 'note        Int')
      .replace('code  String @unique @db.VarChar(20)', 'code  String @db.VarChar(20)')
      .replace('@@index([processedAt])', '');
    expect(await findSchemaDrift(url, changed)).toEqual([
      'column processed_messages.note: schema says integer not null, database has text',
      'processed_messages: index processed_messages_processed_at_idx (processed_at) in the database, not in the schema',
      'Item: unique Item_code_key (code) in the database, not in the schema',
    ]);
  });
});
