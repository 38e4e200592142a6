import { describe, expect, it } from 'vitest';
import { asRedisUser, clusterOf, isRedisUrl, queueName } from './redis.js';

describe('Redis URLs', () => {
  it('reads a cluster URL as its nodes and credentials', () => {
    expect(clusterOf('redis+cluster://ada:p%40ss@10.0.0.1:7000,10.0.0.2,redis-3:7002/')).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 6379 },
        { host: 'redis-3', port: 7002 },
      ],
      username: 'ada',
      password: 'p@ss',
    });
  });

  it('takes redis://, rediss:// and redis+cluster:// with nodes, and nothing else', () => {
    for (const url of ['redis://127.0.0.1:6379', 'rediss://:secret@redis.example:6380/0', 'redis+cluster://a:1,b:2']) {
      expect(isRedisUrl(url), url).toBe(true);
    }
    for (const url of [
      'http://127.0.0.1:6379',
      'redis+cluster://',
      'redis+cluster://a:1,,b:2',
      'redis+cluster://a:x',
      '127.0.0.1:6379',
    ]) {
      expect(isRedisUrl(url), url).toBe(false);
    }
  });

  it("names a consumer's queue with a hash tag only on a cluster", () => {
    expect(queueName('inventory.order-placed.v1', 'redis://127.0.0.1:6379')).toBe('inventory.order-placed.v1');
    expect(queueName('inventory.order-placed.v1', 'redis+cluster://a:1')).toBe('{inventory.order-placed.v1}');
  });

  it('gives a URL, one Redis or a cluster, the credentials of a user in place of its own', () => {
    expect(asRedisUser('redis://:admin@127.0.0.1:6379/0', 'idem-orders', 'p@ss')).toBe(
      'redis://idem-orders:p%40ss@127.0.0.1:6379/0',
    );
    expect(asRedisUser('redis+cluster://:admin@a:7000,b:7001', 'idem-orders', 'pw')).toBe(
      'redis+cluster://idem-orders:pw@a:7000,b:7001',
    );
    expect(clusterOf(asRedisUser('redis+cluster://a:7000', 'idem-orders', 'p@ss'))).toMatchObject({
      username: 'idem-orders',
      password: 'p@ss',
    });
  });
});
