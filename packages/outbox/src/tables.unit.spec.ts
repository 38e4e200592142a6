/** The test kit's tables are the packages' own: read from their folders, the same as imported. */
import { aggregateVersionTables, inboxTables } from '@idem/inbox';
import { testkitTables } from '@idem/testkit';
import { describe, expect, it } from 'vitest';
import { outboxTables } from './tables.js';

describe("the test kit's tables", () => {
  it("are the inbox's and the outbox's own", () => {
    expect(testkitTables).toEqual([inboxTables, aggregateVersionTables, outboxTables]);
  });
});
