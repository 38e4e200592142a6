// Before any test: PostgreSQL and Redis must answer, or `pnpm test` says which is missing and
// how to get it, instead of a stack trace from every test file.
import { unreachablePrerequisites } from '@idem/native-run';

export default async function checkPrerequisites(): Promise<void> {
  const missing = await unreachablePrerequisites({
    postgres: {
      url: process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432',
      variable: 'TEST_POSTGRES_URL',
    },
    redis: { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', variable: 'REDIS_URL' },
  });
  if (!missing) return;
  console.error(`\n${missing}\n`);
  process.exit(1);
}
