// `pnpm check`: the exactly-once checker against a running system (read-only; safe for production).
// Reads ORDERS_/INVENTORY_/PAYMENTS_/NOTIFICATIONS_DATABASE_URL, STRIPE_API_BASE, STRIPE_API_KEY,
// MAIL_API, CHECK_QUIET_WINDOW_MS, CHECK_STUCK_AFTER_MS; the defaults are `pnpm start`'s system
// (IDEM_PORT_OFFSET / IDEM_SYSTEM choose another one, as they do for `pnpm start`).
import { formatReport, runChecks, SERVICES } from '@idem/checker';
import { systemFromEnv } from './system.js';

const env = process.env;
const system = systemFromEnv(env);
const report = await runChecks({
  databaseUrls: Object.fromEntries(
    SERVICES.map((s) => [s, env[`${s.toUpperCase()}_DATABASE_URL`] ?? system.databaseUrls[s]]),
  ) as Record<(typeof SERVICES)[number], string>,
  stripe: {
    apiBase: env.STRIPE_API_BASE ?? system.urls.stripe,
    apiKey: env.STRIPE_API_KEY ?? 'sk_test_idem_simulator',
  },
  mailApi: env.MAIL_API ?? system.urls.mail,
  ...(env.ADMIN_TOKEN ? { mailApiToken: env.ADMIN_TOKEN } : {}),
  quietWindowMs: Number(env.CHECK_QUIET_WINDOW_MS ?? 60_000),
  stuckAfterMs: Number(env.CHECK_STUCK_AFTER_MS ?? 300_000),
});
console.log(formatReport(report));
process.exit(report.ok ? 0 : 1);
