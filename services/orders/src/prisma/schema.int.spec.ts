import { fileURLToPath } from 'node:url';
import { schemaDriftOf } from '@idem/testkit';
import { describe, expect, it } from 'vitest';
import { PACKAGE_TABLES } from '../tables.js';

describe('orders database', () => {
  it("is migrated to exactly the tables, columns, keys and indexes of schema.prisma and its packages' models", async () => {
    expect(await schemaDriftOf(fileURLToPath(new URL('../..', import.meta.url)), PACKAGE_TABLES)).toEqual([]);
  });
});
