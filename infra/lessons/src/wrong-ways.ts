import type { AnyEnvelope } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { bodyHash, Inbox, type DeliveryOutcome, type MessageHandler } from '@idem/inbox';
import type { DeliveryReport } from '@idem/messaging';

/**
 * The article's common mistakes, each written the way a plausible consumer would write it, behind
 * the interface of the right way (an `Inbox` whose `consume` is overridden, handed to
 * `startConsumer` in place of the right one). Nothing in the production packages exists to be
 * wrong: what is there are the one-line crash switches that mark the failure windows these
 * mistakes fall into. Read each next to the right way in `packages/inbox/src/inbox.ts` and
 * `packages/transport/src/consumer-runner.ts`.
 */
export const MISTAKES = ['ack-before-commit', 'separate-dedupe-transaction', 'read-then-insert', 'no-inbox'] as const;
export type Mistake = (typeof MISTAKES)[number];

interface WrongWay<Tx extends SqlClient> {
  readonly db: TransactionalClient<Tx>;
  /** The crash switches: the window each mistake falls into is opened with `crash-after-commit`. */
  readonly faults: Faults;
  /** The right way's inbox: what the mistakes call when they do call it. */
  readonly rightWay: Inbox<Tx>;
}

/**
 * What a lesson's consumer runner is given (spread into `startConsumer`'s options): the inbox, the
 * runner's own switches, and what to call once the broker settled a delivery.
 */
export interface WrongWayConsumer<Tx extends SqlClient> {
  readonly inbox: Inbox<Tx>;
  readonly faults: Faults;
  readonly onRecorded?: (report: DeliveryReport) => void;
}

export function wrongWay<Tx extends SqlClient>(mistake: Mistake, options: WrongWay<Tx>): WrongWayConsumer<Tx> {
  if (mistake === 'ack-before-commit') return acknowledgeBeforeCommit(options);
  const consume = {
    'separate-dedupe-transaction': recordInASecondTransaction,
    'read-then-insert': readThenInsert,
    'no-inbox': noRecord,
  }[mistake];
  return {
    inbox: new WrongWayInbox(options.db, (consumer, message, handler) => consume(options, consumer, message, handler)),
    faults: options.faults,
  };
}

type Consume<Tx extends SqlClient> = <M extends AnyEnvelope>(
  consumer: string,
  message: M,
  handler: MessageHandler<Tx, M>,
) => Promise<DeliveryOutcome>;

/** An inbox that consumes the wrong way; a batch is its messages side by side, each on its own. */
class WrongWayInbox<Tx extends SqlClient> extends Inbox<Tx> {
  constructor(
    db: TransactionalClient<Tx>,
    private readonly wrongly: Consume<Tx>,
  ) {
    super({ db });
  }

  override consume<M extends AnyEnvelope>(consumer: string, message: M, handler: MessageHandler<Tx, M>) {
    return this.wrongly(consumer, message, handler);
  }

  override consumeBatch<M extends AnyEnvelope>(
    consumer: string,
    messages: readonly M[],
    handler: MessageHandler<Tx, M>,
  ) {
    return Promise.all(messages.map((message) => this.wrongly(consumer, message, handler)));
  }
}

/** The processed record, a conflict ignored (as these mistakes do). */
const record = (tx: SqlClient, consumer: string, message: AnyEnvelope) => tx.$executeRaw`
  INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
  VALUES (${consumer}, ${message.messageId}::uuid, ${bodyHash(message.body)}, now()) ON CONFLICT DO NOTHING`;

/**
 * WRONG: "store the ID in a different transaction". The business change commits on its own; the
 * record follows in a second transaction. A crash in between leaves the effect without its
 * record, and the redelivery applies it again.
 */
async function recordInASecondTransaction<Tx extends SqlClient, M extends AnyEnvelope>(
  { db, faults }: WrongWay<Tx>,
  consumer: string,
  message: M,
  handler: MessageHandler<Tx, M>,
): Promise<DeliveryOutcome> {
  await db.$transaction((tx) => handler(message, tx));
  faults.crashIf('crash-after-commit', consumer);
  await db.$transaction(async (tx) => record(tx, consumer, message));
  return { outcome: 'processed' };
}

/** How long read-then-insert waits between its read and its insert: a wider race window, so two cores show it every time. */
const RACE_WINDOW_MS = 500;

/**
 * WRONG: "read before insert". A read decides, and the insert that follows ignores a conflict.
 * Two deliveries at the same moment both read "absent" and both apply the change.
 */
function readThenInsert<Tx extends SqlClient, M extends AnyEnvelope>(
  { db }: WrongWay<Tx>,
  consumer: string,
  message: M,
  handler: MessageHandler<Tx, M>,
): Promise<DeliveryOutcome> {
  return db.$transaction(async (tx) => {
    const found = await tx.$queryRaw<unknown[]>`
      SELECT 1 FROM processed_messages WHERE consumer = ${consumer} AND message_id = ${message.messageId}::uuid`;
    if (found.length > 0) return { outcome: 'duplicate' } as const;
    await new Promise((resolve) => setTimeout(resolve, RACE_WINDOW_MS));
    await handler(message, tx);
    await record(tx, consumer, message);
    return { outcome: 'processed' } as const;
  });
}

/**
 * WRONG: "assume the broker's duplicate detection is enough". No record at all; BullMQ's jobId
 * dedupe is trusted to keep copies out. It only covers one job id while the job is kept: a
 * republication under another id, or after the completed job was removed, runs the change again.
 */
async function noRecord<Tx extends SqlClient, M extends AnyEnvelope>(
  { db }: WrongWay<Tx>,
  _consumer: string,
  message: M,
  handler: MessageHandler<Tx, M>,
): Promise<DeliveryOutcome> {
  await db.$transaction((tx) => handler(message, tx));
  return { outcome: 'processed' };
}

/**
 * WRONG: "acknowledge before commit". The delivery is answered `processed` at once, so the broker
 * settles it and forgets the job; the work is done once it has. A crash in between loses the
 * message: nothing will ever deliver it again. (The runner gets no switches of its own: the
 * window here is after the settlement, which this opens itself, not before it.)
 */
function acknowledgeBeforeCommit<Tx extends SqlClient>({ db, faults, rightWay }: WrongWay<Tx>): WrongWayConsumer<Tx> {
  const acknowledged = new Map<string, () => Promise<DeliveryOutcome>>();
  return {
    inbox: new WrongWayInbox(db, async (consumer, message, handler) => {
      acknowledged.set(`${consumer}:${message.messageId}`, () => rightWay.consume(consumer, message, handler));
      return { outcome: 'processed' };
    }),
    faults: noFaults,
    onRecorded: (report) => {
      const key = `${report.consumer}:${report.messageId}`;
      const work = acknowledged.get(key);
      if (!work) return;
      acknowledged.delete(key);
      faults.crashIf('crash-after-commit', report.consumer); // the window: settled, not yet committed
      work().catch((error: unknown) => console.error(error));
    },
  };
}
