import { fileURLToPath } from 'node:url';
import { schemaDriftOf } from '@idem/testkit';
import { describe, expect, it } from 'vitest';

describe('inventory database', () => {
  it('is migrated to exactly the tables, columns, keys and indexes schema.prisma declares', async () => {
    expect(await schemaDriftOf(fileURLToPath(new URL('../..', import.meta.url)))).toEqual([]);
  });
});
