import { describe, expect, it } from 'vitest';
import { identifier, sql } from './sql.js';

describe('sql', () => {
  it('splices a piece into another with its values still parameters, in order', () => {
    const moved = sql`moved AS (UPDATE orders SET status = ${'PAID'} WHERE id = ${'o-1'} RETURNING id)`;
    const statement = sql`WITH ${moved}, record AS (INSERT INTO r VALUES (${'m-1'})) SELECT ${1} FROM ${identifier('moved')}`;
    expect(statement.strings).toEqual([
      'WITH moved AS (UPDATE orders SET status = ',
      ' WHERE id = ',
      ' RETURNING id), record AS (INSERT INTO r VALUES (',
      ')) SELECT ',
      ' FROM moved',
    ]);
    expect(statement.values).toEqual(['PAID', 'o-1', 'm-1', 1]);
  });

  it('never makes a value SQL: text is a parameter, a name only a plain identifier', () => {
    const statement = sql`SELECT ${'1; DROP TABLE orders'}`;
    expect(statement.strings).toEqual(['SELECT ', '']);
    expect(statement.values).toEqual(['1; DROP TABLE orders']);
    for (const name of ['moved; DROP TABLE orders', 'Moved', '"moved"', ''])
      expect(() => identifier(name), name).toThrow(/not a plain SQL identifier/);
  });
});
