// Before any test: PostgreSQL and Redis must answer, or `pnpm test` says which is missing and
// how to get it, instead of a stack trace from every test file.
import { unreachablePrerequisites } from '@idem/native-run';
import { postgresServerUrl, redisUrl } from '@idem/testkit';

export default async function checkPrerequisites(): Promise<void> {
  const missing = await unreachablePrerequisites({
    postgres: { url: postgresServerUrl, variable: 'TEST_POSTGRES_URL' },
    redis: { url: redisUrl, variable: 'REDIS_URL' },
  });
  if (!missing) return;
  console.error(`\n${missing}\n`);
  process.exit(1);
}
