import { LIGHT_LOAD_STATEMENTS, measureRoundTrips, ROUND_TRIP_BUDGET, total } from '@idem/bench';
import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';

/**
 * The round-trip budget: what an order asks of PostgreSQL and Redis, counted by the services
 * themselves, may not grow past infra/bench/src/round-trips.ts's ROUND_TRIP_BUDGET. Counts, not
 * timings: the same code asks the same, however busy the machine.
 */
describe('the round-trip budget', () => {
  it('an order asks each service for no more statements, transactions and Redis scripts than budgeted', async () => {
    const {
      byService: counts,
      scripts,
      statementKinds,
    } = await measureRoundTrips({
      orders: 10,
      portOffset: randomInt(8_000, 20_000),
      log: () => {},
    });
    console.log(
      `round trips per order, light load: ${JSON.stringify(counts)}; all services: ${JSON.stringify(total(counts))} ` +
        `(target at light load: ${LIGHT_LOAD_STATEMENTS} statements); Redis scripts by name: ${JSON.stringify(scripts)}; ` +
        `statements by kind: ${JSON.stringify(statementKinds)}`,
    );
    for (const [service, measured] of Object.entries(counts)) {
      const budget = ROUND_TRIP_BUDGET[service];
      expect(budget, `${service} has a budget in infra/bench/src/round-trips.ts`).toBeDefined();
      if (!budget) continue;
      expect
        .soft(measured.statements, `${service}: PostgreSQL statements per order`)
        .toBeLessThanOrEqual(budget.statements);
      expect
        .soft(measured.transactions, `${service}: PostgreSQL transactions per order`)
        .toBeLessThanOrEqual(budget.transactions);
      expect
        .soft(measured.redisScripts, `${service}: Redis scripts per order`)
        .toBeLessThanOrEqual(budget.redisScripts);
      // Counted, so a broken counter cannot pass the budget by counting nothing.
      expect(measured.statements, `${service} counted its statements`).toBeGreaterThan(0);
      expect(measured.redisScripts, `${service} counted its scripts`).toBeGreaterThan(0);
    }
  }, 180_000);
});
