import { dropDatabase, fromNodePostgres, migrate } from '@idem/database';
import { migrationsFolder, postgresServerUrl, uniqueName } from '@idem/testkit';
import { cpSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createDeadLetters } from './dead-letters.js';
import { inboxTables } from './tables.js';

const url = `${postgresServerUrl}/${uniqueName('idem_test_dead_letters').toLowerCase()}`;
afterAll(() => dropDatabase(url));

describe('dead letters stored before their JSON text had a column of its own', () => {
  it('come back as they were delivered once the migration has moved the in-band wrappers out of band', async () => {
    const empty = migrationsFolder();
    // The inbox's tables as they were at their first migration: a table set of that one alone.
    const [first, ...later] = readdirSync(join(inboxTables.directory, 'migrations')).sort();
    expect(later.length).toBeGreaterThan(0);
    const before = mkdtempSync(join(tmpdir(), 'idem-inbox-tables-'));
    cpSync(join(inboxTables.directory, 'migrations', first!), join(before, 'migrations', first!), { recursive: true });
    await migrate({ databaseUrl: url, migrationsDir: empty, include: [{ ...inboxTables, directory: before }] });
    const pool = new pg.Pool({ connectionString: url });
    try {
      // What the previous version wrote: a payload jsonb refused, wrapped; one too large, truncated; a plain one.
      const row = (id: string, payload: unknown) =>
        pool.query(
          `INSERT INTO dead_letters (consumer, message_id, payload, code, reason, attempts, dead_lettered_at)
           VALUES ('c.v1', $1, $2::jsonb, 'malformed_message', 'r', 1, now())`,
          [id, JSON.stringify(payload)],
        );
      await row('wrapped', { $idem_json_text: JSON.stringify({ a: 'x\u0000y' }) });
      await row('truncated', { $idem_truncated_json_text: '{"padding":"xxx', bytes: 300_000, sha256: 'f'.repeat(64) });
      await row('plain', { hello: 'world' });
      await migrate({ databaseUrl: url, migrationsDir: empty, include: [inboxTables] });

      const listed = await createDeadLetters(fromNodePostgres(pool), () => new Date()).list();
      const byId = Object.fromEntries(listed.map((d) => [d.messageId, d]));
      expect(byId.wrapped).toMatchObject({ payload: { a: 'x\u0000y' }, truncated: false });
      expect(byId.truncated).toMatchObject({ payload: '{"padding":"xxx', truncated: true, payloadBytes: 300_000 });
      expect(byId.plain).toMatchObject({ payload: { hello: 'world' }, truncated: false, payloadBytes: 18 });
    } finally {
      await pool.end();
    }
  });
});
