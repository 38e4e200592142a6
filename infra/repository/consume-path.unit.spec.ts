/**
 * The consume path can be followed in an editor: from the function BullMQ calls for a job,
 * "go to definition" on each call (TypeScript's language service, as an editor asks it) reaches
 * the inbox's `INSERT INTO processed_messages`, by the single route and by the group commit's,
 * through named functions and methods only — a closure or a bag of callbacks would end the walk.
 * `pnpm walk` prints the same walk.
 */
import { describe, expect, it } from 'vitest';
import { walkFrom, type Step } from '../../scripts/walk.js';

const JOB_HANDLER = { file: 'packages/transport/src/consumer-runner.ts', name: 'ConsumerRunner.process' };
const INSERT = /INSERT INTO processed_messages/;

describe('the consume path', () => {
  const routes = walkFrom(JOB_HANDLER, INSERT);
  const names = (route: readonly Step[]) => route.map((step) => step.name);

  it('reaches the INSERT from the job handler through named calls an editor follows', () => {
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) expect(route[0]).toMatchObject(JOB_HANDLER);
  });

  it('reaches it alone (Inbox.consume) and beside it in a group commit (Inbox.consumeBatch)', () => {
    const ends = routes.map((route) => names(route).join(' → '));
    expect(ends).toContainEqual(
      'ConsumerRunner.process → ConsumerRunner.consume → DeliveryBatches.add → DeliveryBatches.#flush → ' +
        'ConsumerRunner.commitBatch → Inbox.consume',
    );
    expect(ends).toContainEqual(
      'ConsumerRunner.process → ConsumerRunner.consume → DeliveryBatches.add → DeliveryBatches.#flush → ' +
        'ConsumerRunner.commitBatch → Inbox.consumeBatch → consumeTogether → commitTogether',
    );
  });

  it('would notice a closure in the way', () => {
    // A walk from a function whose only call goes through a variable holding a closure ends there.
    const lost = walkFrom({ file: 'infra/repository/consume-path.fixture.ts', name: 'throughAClosure' }, INSERT);
    expect(lost).toEqual([]);
    const found = walkFrom({ file: 'infra/repository/consume-path.fixture.ts', name: 'throughAFunction' }, INSERT);
    expect(found.map(names)).toEqual([['throughAFunction', 'inserts']]);
  });
});
