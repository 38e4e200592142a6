import {
  formatPauseDrain,
  formatProviderFaultsReport,
  PROVIDER_SCENARIOS,
  runNotificationsBacklog,
  runNotificationsPause,
  runProviderFaults,
} from '@idem/chaos';
import { describe, expect, it } from 'vitest';

// Shorter than the full runs (`pnpm chaos --providers [--full]`, `pnpm chaos --backlog 3000`:
// docs/failure-windows.md), so CI can afford them; the same faults, in the same order.
describe('slow and absent providers (short, as CI runs it)', () => {
  it('sends every email once and charges no cancelled order while SMTP is slow and then down and Stripe is down', async () => {
    const report = await runProviderFaults({ ...PROVIDER_SCENARIOS.slowThenDown, log: () => {} });
    expect(report.ok, formatProviderFaultsReport(report)).toBe(true);
    expect(report.cancels).toBeGreaterThan(0);
    expect(report.endedByStatus.PAID ?? 0).toBeGreaterThan(0);
    // No copy the checker cannot explain (repeated_send fails report.ok). Nothing dies here, so a
    // copy can only be a reply lost as the mail server's connections were cut mid-message: an
    // unconfirmed send, SMTP's documented limit (crash_window_send), at most one an item.
    const copies = report.checker.findings.filter((f) => f.check === 'crash_window_send');
    expect(copies.every((f) => f.examples.every((e) => / 2 copies, [1-9]\d* unconfirmed sends/.test(e)))).toBe(true);
  }, 600_000);

  it('sends every receipt of a backlog that notifications finds when it starts again, with nothing dead-lettered', async () => {
    const report = await runNotificationsBacklog({
      orders: 300,
      ordersPerSecond: 15,
      drainSeconds: 300,
      log: () => {},
    });
    expect(report.ok, formatProviderFaultsReport(report)).toBe(true);
    expect(report.endedByStatus.PAID ?? 0).toBeGreaterThan(0);
  }, 900_000);
  it('sends every email once when replies are lost as the SMTP link turns from slow to a black hole: the next attempt looks them up', async () => {
    const report = await runProviderFaults({ ...PROVIDER_SCENARIOS.lostReplies, log: () => {} });
    expect(report.ok, formatProviderFaultsReport(report)).toBe(true);
    // The native run's sink can be searched: every send whose reply was lost is looked up before
    // anything is sent again, so not one email reaches the server twice.
    expect(report.emails.copies, formatProviderFaultsReport(report)).toBe(0);
  }, 600_000);

  it('drains what waited through a notifications pause while orders keep coming', async () => {
    const report = await runNotificationsPause({ ordersPerSecond: 10, pauseSeconds: 20, log: () => {} });
    expect(report.ok, formatProviderFaultsReport(report)).toBe(true);
    // How fast is measured (the line says PASS or MISS against the pause's length), not asserted here.
    expect(report.pause.drainedAfterSeconds, formatPauseDrain(report.pause)).toBeDefined();
  }, 600_000);
});
