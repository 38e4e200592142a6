// The teaching console (`pnpm start` runs it on 3000; compose as `console`). Reads:
// ORDERS_/INVENTORY_/PAYMENTS_/NOTIFICATIONS_DATABASE_URL (or POSTGRES_URL), REDIS_URL,
// IDEM_QUEUE_PREFIX, ORDERS_API, MAIL_API, STRIPE_API_BASE, STRIPE_API_KEY, ADMIN_TOKEN,
// ORDERS_/INVENTORY_/PAYMENTS_/NOTIFICATIONS_FAULTS_TOKEN (each service's processes' FAULTS_TOKEN),
// CUSTOMER_TOKEN (a customer token for `console`, minted by whoever starts it), CONSOLE_PROCESSES
// (name=url,…), PORT, HOST (the address it binds: loopback unless told otherwise; beyond it, an operator login), CONSOLE_ALLOWED_HOSTS (host:port,… it answers to besides
// 127.0.0.1/localhost on its own port: compose's published port), CONSUMER_LOCK_MS.
import { SERVICES } from '@idem/checker';
import { hostList } from '@idem/http';
import { createConsole } from './console.js';

const env = process.env;
const server = (env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432').replace(/\/$/, '');
const processes = Object.fromEntries(
  (env.CONSOLE_PROCESSES ?? SERVICES.map((s, i) => `${s}=http://127.0.0.1:${3001 + i}`).join(','))
    .split(',')
    .filter(Boolean)
    .map((pair) => pair.split('=', 2) as [string, string]),
);
const console_ = createConsole({
  databaseUrls: Object.fromEntries(
    SERVICES.map((s) => [s, env[`${s.toUpperCase()}_DATABASE_URL`] ?? `${server}/${s}`]),
  ) as Record<(typeof SERVICES)[number], string>,
  redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  queuePrefix: env.IDEM_QUEUE_PREFIX ?? 'idem',
  ordersApi: env.ORDERS_API ?? 'http://127.0.0.1:3001',
  mailApi: env.MAIL_API ?? 'http://127.0.0.1:8025',
  // A live key stays with payments (compose gives the console none): the checker then leaves the provider out.
  ...(env.STRIPE_API_KEY !== ''
    ? {
        stripe: {
          apiBase: env.STRIPE_API_BASE ?? 'http://127.0.0.1:12111',
          apiKey: env.STRIPE_API_KEY ?? 'sk_test_idem_simulator',
        },
      }
    : {}),
  ...(env.ADMIN_TOKEN ? { adminToken: env.ADMIN_TOKEN } : {}),
  faultsTokens: Object.fromEntries(
    SERVICES.flatMap((s) =>
      env[`${s.toUpperCase()}_FAULTS_TOKEN`] ? [[s, env[`${s.toUpperCase()}_FAULTS_TOKEN`]!]] : [],
    ),
  ),
  // Its customer's token, never the key that signs them: the console can act as no other customer.
  ...(env.CUSTOMER_TOKEN ? { customerToken: env.CUSTOMER_TOKEN } : {}),
  processes,
  lessons: env.CONSOLE_LESSONS === '1',
  explorer: env.CONSOLE_EXPLORER === '1',
  allowedHosts: hostList(env.CONSOLE_ALLOWED_HOSTS),
  host: env.HOST ?? '127.0.0.1',
  ...(env.CONSUMER_LOCK_MS ? { consumerLockMs: Number(env.CONSUMER_LOCK_MS) } : {}),
});
const port = Number(env.PORT ?? 3000);
const listening = await console_.listen(port);
console.log(JSON.stringify({ service: 'console', msg: `console on http://127.0.0.1:${port}` }));
const stop = () => listening.close(() => void console_.close().then(() => process.exit(0)));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
