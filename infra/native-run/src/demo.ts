// `pnpm demo`: against a running system (pnpm start), tells four stories and how each ended,
// then a fifth with a duplicate: per consumer, how many deliveries were processed and how many
// suppressed (with `IDEM_FAULTS_ENABLED=1 pnpm start`). It needs the system's operator token:
// ADMIN_TOKEN, or the one `pnpm start` generated and saved.
import { duplicateStory } from './duplicate-story.js';
import { runStories } from './stories.js';
import { systemFromEnv } from './system.js';
import { operatorTokenFile, savedOperatorToken } from './tokens.js';

const { urls, queuePrefix, name } = systemFromEnv();
const adminToken = savedOperatorToken(name);
if (!adminToken) {
  console.error(
    'the demo reads payments and e-mails, which only the operator may: set ADMIN_TOKEN to the system’s operator\n' +
      `token, or start the system with pnpm start, which saves the one it generates in ${operatorTokenFile(name)}`,
  );
  process.exit(2);
}

try {
  const results = await runStories(urls, adminToken);
  console.table(
    results.map((r) => ({
      story: r.story,
      order: r.orderId.slice(0, 8),
      expected: r.expected,
      status: r.status,
      payment: r.payment,
      'emails sent': r.emails.join(', '),
      '': r.ok ? 'ok' : 'UNEXPECTED',
    })),
  );
  const story = await duplicateStory(urls, {
    adminToken,
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    queuePrefix,
  });
  let ok = results.every((r) => r.ok);
  if (story.ran) {
    console.log(`\nwith a duplicate: order ${story.orderId.slice(0, 8)} published twice, ended ${story.status}`);
    console.table(story.consumers);
    ok &&= story.status === 'PAID' && story.consumers.every((c) => c.processed === 1);
  } else {
    console.log(`\nthe story with a duplicate was skipped: ${story.why}`);
  }
  process.exit(ok ? 0 : 1);
} catch (error) {
  console.error(`demo failed: ${(error as Error).message}\nIs the system running? Start it with: pnpm start`);
  process.exit(1);
}
