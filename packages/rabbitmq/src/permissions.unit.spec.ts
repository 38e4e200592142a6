/** A service's RabbitMQ permissions name its own exchanges and queues, and nothing of anyone else's. */
import { reachOf } from '@idem/contracts';
import { describe, expect, it } from 'vitest';
import { catalogue } from '../test/fixtures.js';
import { rabbitmqPermissionsOf } from './permissions.js';

const billing = rabbitmqPermissionsOf(reachOf(catalogue, 'billing'), { prefix: 'idem' });
const matches = (pattern: string, name: string) => new RegExp(pattern).test(name);

describe('rabbitmqPermissionsOf', () => {
  it('writes out what billing declares: its consumer’s queues and exchanges, its subscription, the contract it publishes, the one it subscribes to', () => {
    const own = [
      'idem\\.billing\\.book-lent\\.v1',
      'idem\\.billing\\.book-lent\\.v1\\.dead',
      'idem\\.billing\\.book-lent\\.v1\\.redelivery',
      'idem\\.billing\\.book-lent\\.v1\\.retry',
      'idem\\.billing\\.book-lent\\.v1\\.retry\\.[0-9]+',
    ];
    const subscription = 'idem\\.billing\\.book-lent\\.v1\\.subscription\\.library\\.book-lent\\.v1';
    expect(billing).toEqual({
      configure: `^(${[...own, subscription, 'idem\\.billing\\.fee-charged\\.v1'].sort().join('|')})$`,
      write: `^(${[...own, 'idem\\.billing\\.fee-charged\\.v1'].sort().join('|')})$`,
      read: `^(${[...own, 'idem\\.library\\.book-lent\\.v1'].sort().join('|')})$`,
    });
  });

  it('admits no name of another service’s, nor the default exchange, nor a longer name with an own one in it', () => {
    for (const name of [
      'idem.audit.book-lent.v1',
      'idem.audit.book-lent.v1.redelivery',
      'idem.audit.book-lent.v1.retry.50',
      'idem.library.book-lent.v1x',
      'xidem.billing.book-lent.v1',
      'amq.default',
    ])
      for (const pattern of Object.values(billing)) expect(matches(pattern, name)).toBe(false);
    expect(matches(billing.write, 'idem.library.book-lent.v1')).toBe(false); // it reads loans, never writes one
    expect(matches(billing.configure, 'idem.library.book-lent.v1')).toBe(false); // nor deletes their exchange
    expect(matches(billing.read, 'idem.billing.book-lent.v1.retry.400')).toBe(true);
  });

  it('gives a service that declares nothing no permission at all', () => {
    expect(rabbitmqPermissionsOf({ consumes: [], publishes: [], subscribes: [] })).toEqual({
      configure: '^$',
      write: '^$',
      read: '^$',
    });
  });

  it('refuses a consumer named as a contract: the queue and the exchange would be one name, one permission', () => {
    expect(() =>
      rabbitmqPermissionsOf({
        consumes: ['billing.fee-charged.v1'],
        publishes: ['billing.fee-charged.v1'],
        subscribes: [],
      }),
    ).toThrow(/names a consumer and a contract/);
  });
});
