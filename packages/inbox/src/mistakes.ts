import type { Envelope } from '@idem/contracts';
import type { SqlClient, TransactionalClient, TransactionOptions } from '@idem/database';
import type { Faults } from '@idem/faults';
import { bodyHash } from './body-hash.js';
import type { DeliveryOutcome } from './outcomes.js';

/**
 * The article's common mistakes, made on purpose (wrong-way switches, for `pnpm lesson`). Each
 * one is what a plausible consumer looks like; each breaks the guarantee in the window its
 * lesson opens. `inbox.consume` takes one of these paths only while its switch is on, which
 * needs IDEM_FAULTS_ENABLED=1. Read them next to the right way in inbox.ts.
 */
export const INBOX_MISTAKES = [
  'mistake-separate-dedupe-transaction',
  'mistake-read-then-insert',
  'mistake-no-inbox',
] as const;
export type InboxMistake = (typeof INBOX_MISTAKES)[number];

/** The mistake whose switch fires now for this consumer, if one does. */
export const mistakeFor = (faults: Faults, consumer: string): InboxMistake | undefined =>
  INBOX_MISTAKES.find((name) => faults.fires(name, consumer));

interface Inbox<Tx extends SqlClient> {
  readonly db: TransactionalClient<Tx>;
  readonly faults: Faults;
  readonly transaction: TransactionOptions | undefined;
  readonly now: () => Date;
}

/** How long the read-then-insert mistake waits between its read and its insert: a wider race window, so two cores show it every time. */
const RACE_WINDOW_MS = 200;

export async function consumeTheWrongWay<Tx extends SqlClient, M extends Envelope>(
  mistake: InboxMistake,
  { db, faults, transaction, now }: Inbox<Tx>,
  consumer: string,
  message: M,
  handler: (message: M, tx: Tx) => Promise<unknown>,
): Promise<DeliveryOutcome> {
  // The processed record, a conflict ignored (as these mistakes do).
  const record = (tx: SqlClient) => tx.$executeRaw`
    INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
    VALUES (${consumer}, ${message.messageId}::uuid, ${bodyHash(message.body)}, ${now()}) ON CONFLICT DO NOTHING`;
  switch (mistake) {
    case 'mistake-separate-dedupe-transaction': {
      // WRONG: the business change commits on its own; the record follows in a second
      // transaction. A crash in between leaves the effect without its record, and the
      // redelivery applies it again.
      await db.$transaction((tx) => handler(message, tx), transaction);
      faults.crashIf('crash-after-commit', consumer);
      await db.$transaction(async (tx) => record(tx), transaction);
      return { outcome: 'processed' };
    }
    case 'mistake-read-then-insert':
      // WRONG: a read decides, and the insert that follows ignores a conflict. Two deliveries
      // at the same moment both read "absent" and both apply the change.
      return db.$transaction(async (tx) => {
        const found = await tx.$queryRaw<unknown[]>`
          SELECT 1 FROM processed_messages WHERE consumer = ${consumer} AND message_id = ${message.messageId}::uuid`;
        if (found.length > 0) return { outcome: 'duplicate' } as const;
        await new Promise((resolve) => setTimeout(resolve, RACE_WINDOW_MS));
        await handler(message, tx);
        await record(tx);
        return { outcome: 'processed' } as const;
      }, transaction);
    case 'mistake-no-inbox':
      // WRONG: no record at all; BullMQ's jobId dedupe is trusted to keep copies out. It only
      // covers one job id while the job is kept: a republication under another id, or after
      // the completed job was removed, runs the change again.
      await db.$transaction((tx) => handler(message, tx), transaction);
      return { outcome: 'processed' };
  }
}
