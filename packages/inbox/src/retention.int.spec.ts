import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInboxRetention, RetentionError } from './retention.js';

const HOUR = 3_600_000;
const horizon = { brokerRetentionMs: 24 * HOUR, maxRetrySpanMs: HOUR, replayWindowMs: 6 * 24 * HOUR };
const now = new Date('2026-11-30T12:00:00Z');

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('retention');
});
afterAll(() => db.drop());

describe('inbox retention', () => {
  it('refuses a retention shorter than the replay horizon', () => {
    expect(() => createInboxRetention({ db: db.prisma, retentionMs: 7 * 24 * HOUR, horizon })).toThrow(RetentionError);
    expect(() => createInboxRetention({ db: db.prisma, retentionMs: 7 * 24 * HOUR, horizon })).toThrow(
      /shorter than the replay horizon/,
    );
  });

  it('deletes, batch by batch, only the records older than the retention', async () => {
    const retentionMs = 8 * 24 * HOUR;
    const ages = [...Array(25).fill(9 * 24 * HOUR), ...Array(5).fill(7 * 24 * HOUR)];
    await db.prisma.processedMessage.createMany({
      data: ages.map((age) => ({
        consumer: 'c',
        messageId: randomUUID(),
        bodyHash: '0'.repeat(64),
        processedAt: new Date(now.getTime() - age),
      })),
    });
    const statements: string[] = [];
    const counting = {
      $executeRaw: (query: TemplateStringsArray, ...values: unknown[]) => {
        statements.push(query.join('?'));
        return db.prisma.$executeRaw(query, ...values);
      },
      $queryRaw: db.prisma.$queryRaw.bind(db.prisma),
    };
    const retention = createInboxRetention({ db: counting, retentionMs, horizon, batchSize: 10, now: () => now });

    expect((await retention.purge()).deleted).toBe(25);
    expect(statements).toHaveLength(3);
    const left = await db.prisma.processedMessage.findMany();
    expect(left).toHaveLength(5);
    expect(left.every((r) => now.getTime() - r.processedAt.getTime() < retentionMs)).toBe(true);
  });
});
