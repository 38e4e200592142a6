import { formatChaosReport, runChaos } from '@idem/chaos';
import { describe, expect, it } from 'vitest';

/** What both runs share: short, as CI runs it. */
const SHORT = { orders: 30, replicas: 2, seconds: 20, drainSeconds: 150, log: () => {} };

describe('the chaos run (short, as CI runs it)', () => {
  it('ends every order once, a cancelled one with no money kept, while processes are SIGKILLed and paused past their lock, PostgreSQL restarts, Redis stalls, and every publication is doubled', async () => {
    const report = await runChaos({ ...SHORT, kills: 2, pauses: 1, postgresRestarts: 1, redisStalls: 1 });
    expect(report.ok, formatChaosReport(report)).toBe(true);
    expect(report.duplicatesSuppressed).toBeGreaterThan(0);
    expect(report.cancels).toBeGreaterThan(0); // and the checker found no cancelled order charged
    expect(report.faults.map((f) => f.split(' ')[0]).sort()).toEqual(['kill', 'kill', 'pause', 'postgres', 'stall']);
  }, 400_000);

  it('ends every order once on a Redis Cluster whose busiest master is SIGKILLed and replaced, beside the other faults', async () => {
    const report = await runChaos({
      ...SHORT,
      kills: 1,
      pauses: 1,
      postgresRestarts: 0,
      redisCluster: true,
      brokerKills: 1,
    });
    expect(report.ok, formatChaosReport(report)).toBe(true);
    expect(report.faults.map((f) => f.split(' ')[0]).sort()).toEqual(['broker', 'kill', 'pause']);
  }, 400_000);
});
