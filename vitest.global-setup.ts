// Before any test: PostgreSQL, Redis and RabbitMQ must answer, or `pnpm test` says which is
// missing and how to get it, instead of a stack trace from every test file.
import { unreachablePrerequisites } from '@idem/native-run';
import { postgresServerUrl, rabbitmqUrl, redisUrl } from '@idem/testkit';
import { connect } from 'amqplib';

export default async function checkPrerequisites(): Promise<void> {
  const missing = [
    await unreachablePrerequisites({
      postgres: { url: postgresServerUrl, variable: 'TEST_POSTGRES_URL' },
      redis: { url: redisUrl, variable: 'REDIS_URL' },
    }),
    await unreachableRabbitmq(),
  ].filter(Boolean);
  if (missing.length === 0) return;
  console.error(`\n${missing.join('\n\n')}\n`);
  process.exit(1);
}

/** RabbitMQ, the second transport: the conformance suite and the examples run on it too. */
async function unreachableRabbitmq(): Promise<string | undefined> {
  try {
    await (await connect(rabbitmqUrl, { timeout: 3_000 })).close();
    return undefined;
  } catch (error) {
    const where = new URL(rabbitmqUrl);
    return [
      `The tests need RabbitMQ too, and cannot reach it at ${where.hostname}:${where.port || 5672} (RABBITMQ_URL): ${(error as Error).message}`,
      'Start it from the OS packages (Debian/Ubuntu): apt-get install -y rabbitmq-server; rabbitmq-server -detached',
      '(or: source scripts/machine.sh && prepare_machine rabbitmq, as .ci/run does).',
    ].join('\n');
  }
}
