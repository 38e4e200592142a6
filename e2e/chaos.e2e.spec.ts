import { formatChaosReport, runChaos } from '@idem/chaos';
import { describe, expect, it } from 'vitest';

describe('the chaos run (short, as CI runs it)', () => {
  it('ends every order once while processes are SIGKILLed and every publication is doubled', async () => {
    const report = await runChaos({ orders: 30, kills: 3, seconds: 15, settleSeconds: 120, log: () => {} });
    expect(report.ok, formatChaosReport(report)).toBe(true);
    expect(report.duplicatesSuppressed).toBeGreaterThan(0);
    expect(report.kills).toHaveLength(3);
  }, 300_000);
});
