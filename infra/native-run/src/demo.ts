// `pnpm demo`: against a running system (pnpm start), tells four stories and how each ended,
// then a fifth with a duplicate: per consumer, how many deliveries were processed and how many
// suppressed (with `IDEM_FAULTS_ENABLED=1 pnpm start`). It needs payments', notifications' and
// orders' operator tokens: PAYMENTS_/NOTIFICATIONS_/ORDERS_ADMIN_TOKEN, or the ones `pnpm start`
// generated and saved.
import { duplicateStory } from './duplicate-story.js';
import { runStories } from './stories.js';
import { systemFromEnv } from './system.js';
import { operatorTokenFile, operatorTokenVariable, savedOperatorTokens } from './tokens.js';

const { urls, queuePrefix, name } = systemFromEnv();
const tokens = savedOperatorTokens(name);
const missing = (['payments', 'notifications'] as const).filter((service) => !tokens[service]);
if (missing.length > 0) {
  console.error(
    'the demo reads payments and e-mails, which only their operator may: set ' +
      `${missing.map(operatorTokenVariable).join(' and ')}, or start the system with pnpm start, which saves
` +
      `the tokens it generates (${missing.map((service) => operatorTokenFile(name, service)).join(', ')})`,
  );
  process.exit(2);
}

try {
  const results = await runStories(urls, tokens);
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
    ordersToken: tokens.orders,
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
