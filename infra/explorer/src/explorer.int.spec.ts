import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { explore, type Report } from './explore.js';
import { MODELS } from './models/index.js';
import { replay, writeCounterexample } from './replay.js';
import { cancelVersusReservation } from './small-space.js';

const minutes = 60_000;
const { orders, payments, inventory, notifications } = MODELS as Required<typeof MODELS>;

const together = (report: Report) =>
  report.counterexamples.filter(({ schedule }) => schedule.actions.some((action) => 'together' in action));

describe('the explorer', () => {
  it.each([
    ['orders', orders!],
    ['payments', payments!],
    ['inventory', inventory!],
    ['notifications', notifications!],
  ])(
    'finds every invariant kept at %s, in every order, crash and interleaving of one order’s messages',
    async (_, model) => {
      const report = await explore(model);
      expect(report.counterexamples.map(({ broken, trace }) => ({ broken, trace }))).toEqual([]);
      expect(report.schedules.sequential).toBeGreaterThan(10);
      expect(report.schedules.crashes).toBeGreaterThan(10);
      expect(report.schedules.concurrent).toBeGreaterThan(10);
      expect(report.states).toBeGreaterThan(1);
      // A second copy of an e-mail only where the dispatcher died between the server's yes and its record.
      if (model === notifications) expect(report.windows.crash_window_send).toBeGreaterThan(0);
    },
    10 * minutes,
  );

  it(
    'finds the cancel/charge race once payments opens the attempt without locking the order’s row, and replays it',
    async () => {
      const report = await explore(payments!, { wrongWay: 'unlocked-order-row' });
      // Neither order alone breaks it: only two at once, statement by statement.
      expect(report.schedules.sequential).toBeGreaterThan(10);
      const [race] = together(report);
      expect(race?.broken).toContain('the cancelled order keeps 4999 cents at the provider');
      expect(report.counterexamples).toHaveLength(together(report).length);
      const file = writeCounterexample(mkdtempSync(join(tmpdir(), 'idem-explorer-')), race!, 1);
      expect((await replay(file)).broken).toEqual(race!.broken);
    },
    10 * minutes,
  );

  it(
    'finds a late order-placed reserving stock for a cancelled order once the cancellation leaves no tombstone',
    async () => {
      const report = await explore(inventory!, { wrongWay: 'no-tombstone' });
      const [late] = report.counterexamples;
      expect(late?.schedule.actions[0]).toEqual({ step: 'cancelled' });
      expect(late?.broken.join('\n')).toMatch(/an order that will never be paid holds/);
      const file = writeCounterexample(mkdtempSync(join(tmpdir(), 'idem-explorer-')), late!, 1);
      expect((await replay(file)).broken).toEqual(late!.broken);
    },
    10 * minutes,
  );

  it('shows the console every interleaving of a cancel and a reservation at payments, each with its final state', async () => {
    const right = await cancelVersusReservation('right');
    expect(right.schedules.length).toBe(right.report.schedules.concurrent);
    expect(right.schedules.length).toBeGreaterThan(1);
    expect(right.report.counterexamples).toEqual([]);
    const wrong = await cancelVersusReservation('wrong');
    // Every interleaving, even past the first that breaks: the whole small space.
    expect(wrong.report.counterexamples.length).toBeGreaterThan(1);
    expect(wrong.schedules.filter((s) => s.broken.length > 0)).toHaveLength(wrong.report.counterexamples.length);
    expect(new Set(wrong.schedules.map((s) => s.state)).size).toBe(wrong.report.states);
  }, 120_000);
});
