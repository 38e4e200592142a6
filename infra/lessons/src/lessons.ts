import { createFaults, noFaults, parseFaultRules } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { createPublisher, startConsumer, type Consumer, type DeliveryReport } from '@idem/messaging';
import {
  createTestDatabase,
  deleteQueues,
  exited,
  orderPlacedMessage,
  printed,
  startScript,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { LESSON_CONSUMER, LESSON_POLICY, STOCK, takeOneUnit } from './effect.js';
import { wrongWay, type Mistake } from './wrong-ways.js';
import { shop } from '@idem/shop';

/**
 * The article's common mistakes, runnable. Each lesson makes one mistake on purpose (a wrong-way
 * inbox of `wrong-ways.ts` in place of the right one) and opens the failure window that exposes
 * it; then does the same the right way under the same fault. One message is
 * published; the business change takes one unit of stock per application, so the verdict is
 * plain arithmetic: fewer units than messages is a lost message, more is a doubled effect.
 *
 * Every real consumer in idem is also protected by a business key (one reservation per
 * order, one payment attempt, one email per business key), which would hide an inbox mistake:
 * defence in depth. The lessons use a change with no such key, so the inbox alone stands
 * between a repeated delivery and a repeated effect.
 */
export type Verdict = 'lost' | 'doubled' | 'exactly once';

export interface Lesson {
  /** The mistake's name in the article's "Common Mistakes". */
  readonly mistake: string;
  readonly wrongWay: Mistake;
  /** The fault that opens the window, in IDEM_FAULTS syntax. */
  readonly fault: string;
  readonly expect: Verdict;
  readonly why: string;
  /** Where the wrong way and the right way are in the code. */
  readonly code: string;
  readonly run: (context: LessonContext, wrong: boolean) => Promise<void>;
}

interface LessonContext {
  readonly db: TestDatabase;
  readonly prefix: string;
  readonly message: ReturnType<typeof orderPlacedMessage>;
  readonly say: (line: string) => void;
  readonly deliveries: DeliveryReport[];
  /** A consumer in this process (a restarted or a second instance), the wrong way when a mistake is named. */
  consumer(mistake?: Mistake): Consumer;
  /** Publishes the lesson's message (twice under publish-twice). */
  publish(faults?: string): Promise<void>;
}

/**
 * The lesson's consumer process: its source here, or — where the lessons run from a bundle (the
 * console's image) — the bundle built beside it (scripts/build.ts).
 */
const consumerProcess = import.meta.url.endsWith('.ts')
  ? new URL('./consumer-process.ts', import.meta.url)
  : new URL('./lesson-consumer.js', import.meta.url);

const crashThenRestart = async (context: LessonContext, mistake: Mistake | undefined) => {
  const child = startScript(consumerProcess, {
    DATABASE_URL: context.db.url,
    IDEM_PREFIX: context.prefix,
    IDEM_FAULTS_ENABLED: '1',
    IDEM_FAULTS: 'crash-after-commit count=1',
    IDEM_LESSON_MISTAKE: mistake ?? '',
  });
  await printed(child, 'ready');
  await context.publish();
  context.say(`the consumer process ended with ${String(await exited(child))}`);
  context.consumer(); // a restarted instance takes over what the dead one left
  // Its lock is 1 s and stalled jobs are checked every 0.3 s: anything to redeliver comes within seconds.
  await new Promise((resolve) => setTimeout(resolve, 4_000));
};

/** A lesson whose window is a crash right after the first commit (or, the wrong way, the first "ack"). */
const crashLesson =
  (mistake: Mistake) =>
  (context: LessonContext, wrong: boolean): Promise<void> =>
    crashThenRestart(context, wrong ? mistake : undefined);

export const LESSONS = {
  'ack-before-commit': {
    mistake: 'Acknowledge before commit',
    wrongWay: 'ack-before-commit',
    fault: 'crash-after-commit count=1',
    expect: 'lost',
    why: 'the broker forgot the message when it was acknowledged; the process died before the transaction committed, so nothing will ever deliver it again',
    code: 'infra/lessons/src/wrong-ways.ts (acknowledgeBeforeCommit; the right way: packages/transport/src/consumer-runner.ts, ConsumerRunner.process settles after inbox.consume returned)',
    run: crashLesson('ack-before-commit'),
  },
  'separate-dedupe-transaction': {
    mistake: 'Store the ID in a different transaction',
    wrongWay: 'separate-dedupe-transaction',
    fault: 'crash-after-commit count=1',
    expect: 'doubled',
    why: 'the business change committed on its own; the process died before the record did, so the redelivery found no record and applied the change again',
    code: 'infra/lessons/src/wrong-ways.ts (recordInASecondTransaction; the right way: packages/inbox/src/inbox.ts, one transaction)',
    run: crashLesson('separate-dedupe-transaction'),
  },
  'read-then-insert': {
    mistake: 'Read before insert',
    wrongWay: 'read-then-insert',
    fault: 'publish-twice (two copies delivered to two instances at once)',
    expect: 'doubled',
    why: 'both instances read "no record" before either inserted one; the insert that followed ignored the conflict instead of letting it decide',
    code: 'infra/lessons/src/wrong-ways.ts (readThenInsert; the right way: packages/inbox/src/inbox.ts inserts first and the primary key decides)',
    run: async (context, wrong) => {
      const mistake = wrong ? 'read-then-insert' : undefined;
      context.consumer(mistake);
      context.consumer(mistake);
      await context.publish('publish-twice');
      await waitFor(() => context.deliveries.length >= 2, { what: 'both copies delivered', timeoutMs: 15_000 });
    },
  },
  'no-inbox': {
    mistake: "Assume the broker's duplicate detection is enough",
    wrongWay: 'no-inbox',
    fault: 'publish-twice (a republication under another job id)',
    expect: 'doubled',
    why: "BullMQ's dedupe covers one job id while the job is kept; the copy came under another id, and with no record nothing stopped it",
    code: 'infra/lessons/src/wrong-ways.ts (noRecord; the right way: packages/inbox/src/inbox.ts)',
    run: async (context, wrong) => {
      context.consumer(wrong ? 'no-inbox' : undefined);
      await context.publish('publish-twice');
      await waitFor(() => context.deliveries.length >= 2, { what: 'both copies delivered', timeoutMs: 15_000 });
    },
  },
} as const satisfies Record<string, Lesson>;

export type LessonName = keyof typeof LESSONS;

export interface LessonRun {
  readonly lesson: LessonName;
  readonly way: 'wrong' | 'right';
  readonly messages: number;
  readonly applied: number;
  readonly verdict: Verdict;
  readonly narrative: string[];
}

/** Runs one lesson one way, in a database and queue prefix of its own; says what happened. */
export async function runLesson(name: LessonName, way: 'wrong' | 'right'): Promise<LessonRun> {
  const lesson: Lesson = LESSONS[name];
  const narrative: string[] = [];
  const say = (line: string) => narrative.push(line);
  const db = await createTestDatabase(`lesson_${name.replaceAll('-', '_')}`);
  const prefix = uniqueName('idem_lesson');
  const consumers: Consumer[] = [];
  const deliveries: DeliveryReport[] = [];
  const message = orderPlacedMessage();
  const context: LessonContext = {
    db,
    prefix,
    message,
    say,
    deliveries,
    consumer(mistake) {
      const client = db.connect();
      const rightWay = createInbox({ db: client });
      const consumer = startConsumer({
        catalogue: shop,
        consumer: LESSON_CONSUMER,
        ...(mistake ? wrongWay(mistake, { db: client, faults: noFaults, rightWay }) : { inbox: rightWay }),
        handler: takeOneUnit,
        prefix,
        policy: LESSON_POLICY,
        // Each delivery its own transaction, side by side: two copies in one instance race as
        // they would in two (group commit would queue the second behind the first).
        maxBatch: 1,
        lockDurationMs: 1000,
        stalledIntervalMs: 300,
        onDelivery: (report) => {
          deliveries.push(report);
          say(`delivery ${deliveries.length}: ${report.outcome.outcome}`);
        },
      });
      consumers.push(consumer);
      return consumer;
    },
    async publish(faults = '') {
      const publisher = createPublisher({
        catalogue: shop,
        prefix,
        faults: createFaults(parseFaultRules(faults)),
      });
      await publisher.publish([message]);
      await publisher.close();
      say(`published message ${message.messageId.slice(0, 8)}${faults ? ` under ${faults}` : ''}`);
    },
  };
  try {
    await db.prisma.stockItem.create({ data: { sku: LESSON_CONSUMER, available: STOCK } });
    say(`${way === 'wrong' ? 'WRONG WAY' : 'RIGHT WAY'} — "${lesson.mistake}"; window opened by: ${lesson.fault}`);
    await lesson.run(context, way === 'wrong');
    const applied =
      STOCK - (await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: LESSON_CONSUMER } })).available;
    const verdict: Verdict = applied < 1 ? 'lost' : applied > 1 ? 'doubled' : 'exactly once';
    say(`1 message, its business change applied ${applied}× → ${verdict.toUpperCase()}`);
    if (verdict !== 'exactly once') say(`why: ${lesson.why}`);
    say(`where: ${lesson.code}`);
    return { lesson: name, way, messages: 1, applied, verdict, narrative };
  } finally {
    await Promise.all(consumers.map((c) => c.close(1_000)));
    await deleteQueues(prefix);
    await db.drop();
  }
}
