/**
 * `pnpm new consumer <service> <contract>`: a consumer of one contract in a service — its
 * subscription in the shop's catalogue, its use case (application/, named after the event), its handler
 * (consumers/, the thin adapter that calls it), its tests (processed, duplicate, stale), and its
 * place in the service's composition root.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { serviceOf } from '@idem/contracts';
import { isConsumerName, isEventType } from '@idem/shop';
import { create, insert, pascal, root, ScaffoldError, touched } from './edit.js';

export function newConsumer(service: string, contract: string): void {
  const composition = `services/${service}/src/service.ts`;
  if (!existsSync(join(root, composition))) throw new ScaffoldError(`no service "${service}" (${composition})`);
  if (!isEventType(contract))
    throw new ScaffoldError(`"${contract}" is not a contract of the shop (packages/shop/src/catalogue.ts)`);
  const event = contract.split('.')[1]!;
  const name = `${service}.${contract.slice(contract.indexOf('.') + 1)}`;
  if (isConsumerName(name)) throw new ScaffoldError(`${name} consumes ${contract} already`);
  const handler = `handle${pascal(event)}`;
  const useCase = `apply${pascal(event)}`;

  console.log(`new consumer ${name} of ${contract}`);
  subscribe(contract, name);
  const names = { service, contract, name, event, handler, useCase };
  create(`services/${service}/src/application/${event}.ts`, useCaseFile(names));
  create(`services/${service}/src/consumers/${event}.ts`, handlerFile(names));
  create(`services/${service}/src/consumers/${event}.int.spec.ts`, specFile(names));
  insert(
    composition,
    'after',
    /^import .* from '\.\/config\.js';$/,
    `import { ${handler} } from './consumers/${event}.js';`,
  );
  insert(
    composition,
    'after',
    /^\s+(\/\/ `pnpm new consumer .* adds each consumer here\.|'[\w.-]+': handle\w+\()/,
    `      '${name}': ${handler}({ now }),`,
  );
  console.log(`
next: write what ${name} does in services/${service}/src/application/${event}.ts, then
  pnpm test services/${service}`);
}

/** Adds the consumer to the contract's consumers in the shop's catalogue. */
function subscribe(contract: string, name: string): void {
  const path = 'packages/shop/src/catalogue.ts';
  const source = readFileSync(join(root, path), 'utf8');
  const start = source.indexOf(`'${contract}': {`);
  const list = source.indexOf('consumers: [', start);
  if (start < 0 || list < 0) throw new ScaffoldError(`${path}: ${contract} has no list of consumers`);
  const open = list + 'consumers: ['.length;
  const end = source.indexOf(']', open);
  const consumers = [source.slice(open, end).trim().replace(/,$/, ''), `'${name}'`].filter(Boolean).join(', ');
  writeFileSync(join(root, path), `${source.slice(0, open)}${consumers}${source.slice(end)}`);
  touched.add(path);
  console.log(`  updated  ${path}`);
}

interface Names {
  readonly service: string;
  readonly contract: string;
  readonly name: string;
  readonly event: string;
  readonly handler: string;
  readonly useCase: string;
}

const useCaseFile = ({ service, contract, name, useCase }: Names) => `import type { MessageOf } from '@idem/shop';
import { advanceAggregateVersion } from '@idem/inbox';
import type { Tx } from '../db.js';

/**
 * What ${service} does when ${contract} arrives. It runs inside the inbox's transaction: the
 * processed record, the change made with \`tx\` and the events enqueued with \`enqueue(tx, …)\`
 * (@idem/outbox) commit together, or none of them do. \`stale\` when ${serviceOf(contract)} has
 * published a newer version of this aggregate and it was applied here: nothing changes.
 */
export async function ${useCase}(tx: Tx, message: MessageOf<'${name}'>, now: Date): Promise<'applied' | 'stale'> {
  const applied = await advanceAggregateVersion(tx, {
    scope: '${service}:${serviceOf(contract)}',
    aggregateId: message.aggregateId,
    version: message.aggregateVersion,
    now,
  });
  if (!applied) return 'stale';

  // The business change goes here, with tx.
  return 'applied';
}
`;

const handlerFile = ({
  contract,
  name,
  event,
  handler,
  useCase,
}: Names) => `import type { MessageOf } from '@idem/shop';
import { processed, stale, type MessageHandler } from '@idem/inbox';
import { ${useCase} } from '../application/${event}.js';
import type { Tx } from '../db.js';

/** ${name}: ${contract} arrives; the use case applies it, and its answer becomes the outcome. */
export function ${handler}({ now }: { now: () => Date }): MessageHandler<Tx, MessageOf<'${name}'>> {
  return async (message, tx) => {
    if ((await ${useCase}(tx, message, now())) === 'stale')
      return stale(\`\${message.aggregateId} is past version \${message.aggregateVersion} here\`);
    return processed;
  };
}
`;

const specFile = ({ service, contract, name, event, handler }: Names) => `import { randomUUID } from 'node:crypto';
import { createInbox } from '@idem/inbox';
import { serviceDatabase, testMessage } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectDatabase } from '../db.js';
import { PACKAGE_TABLES } from '../tables.js';
import { ${handler} } from './${event}.js';

const CONSUMER = '${name}';
const { db } = serviceDatabase('${service}', {
  root: new URL('../../', import.meta.url),
  tables: PACKAGE_TABLES,
  connect: connectDatabase,
  hooks: { beforeAll, afterAll },
});

const handler = ${handler}({ now: () => new Date() });
const consume = (message: ReturnType<typeof testMessage<'${contract}'>>) =>
  createInbox({ db }).consume(CONSUMER, message, handler);
const processedRecords = (messageId: string) =>
  db.processedMessage.count({ where: { consumer: CONSUMER, messageId } });

describe(CONSUMER, () => {
  it('processes a message and records it, once', async () => {
    const message = testMessage('${contract}');
    expect(await consume(message)).toEqual({ outcome: 'processed' });
    expect(await processedRecords(message.messageId)).toBe(1);
  });

  it('answers a redelivery as a duplicate and changes nothing', async () => {
    const message = testMessage('${contract}');
    await consume(message);
    expect(await consume(message)).toEqual({ outcome: 'duplicate' });
    expect(await processedRecords(message.messageId)).toBe(1);
  });

  it('answers a message older than one already applied as stale', async () => {
    const aggregateId = randomUUID();
    await consume(testMessage('${contract}', { aggregateId, aggregateVersion: 2 }));
    const late = testMessage('${contract}', { aggregateId, aggregateVersion: 1 });
    expect(await consume(late)).toMatchObject({ outcome: 'stale' });
    expect(await processedRecords(late.messageId)).toBe(1);
  });
});
`;
