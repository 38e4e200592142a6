import { DeadLetterWriteError, UnservedSubscriptionError } from '@idem/transport';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { logIdemError } from './idem.js';

/** The lines a logger wrote, as level and message. */
function logged(report: (log: pino.Logger) => void): { level: number; msg: string }[] {
  const lines: string[] = [];
  report(pino({ level: 'info' }, { write: (line: string) => lines.push(line) }));
  return lines.map((line) => JSON.parse(line) as { level: number; msg: string });
}

describe('what the composition reports, as a log line', () => {
  it('says at info, not as an error, that a consumer waits for a producer that has not declared its contract yet', () => {
    const lines = logged((log) =>
      logIdemError(
        log,
        'inventory',
        new UnservedSubscriptionError('inventory.payment-captured.v1', 'payments.payment-captured.v1'),
        'inventory.payment-captured.v1',
      ),
    );
    expect(lines).toEqual([
      expect.objectContaining({
        level: pino.levels.values.info,
        consumer: 'inventory.payment-captured.v1',
        contract: 'payments.payment-captured.v1',
      }),
    ]);
    expect(lines[0]!.msg).not.toMatch(/error/i);
  });

  it('keeps a failure of the consumer an error, and a dead letter not stored an error', () => {
    const lines = logged((log) => {
      logIdemError(log, 'inventory', new Error('connect ECONNREFUSED'), 'inventory.order-placed.v1');
      logIdemError(
        log,
        'inventory',
        new DeadLetterWriteError('inventory.order-placed.v1', 'm1', new Error('x')),
        'inventory.order-placed.v1',
      );
      logIdemError(log, 'inventory', new Error('timeout'), 'maintenance');
    });
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      [pino.levels.values.error, 'consumer error'],
      [pino.levels.values.error, 'dead letter not stored'],
      [pino.levels.values.warn, 'inventory maintenance failed; will try again'],
    ]);
  });
});
