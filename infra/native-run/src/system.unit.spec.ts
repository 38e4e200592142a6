import { describe, expect, it } from 'vitest';
import { DEVELOPMENT_JWT_SECRET } from '@idem/http';
import { bindRefusal, describeSystem, SERVICES, systemFromEnv } from './system.js';
import { hasLuaSandboxFixes } from './redis-users.js';

describe('which system a command means', () => {
  it('is the default system with no offset: the plain databases and the idem prefix', () => {
    const system = systemFromEnv({});
    expect(system.name).toBeUndefined();
    expect(system.queuePrefix).toBe('idem');
    expect(system.databaseUrls.orders).toBe('postgresql://postgres@127.0.0.1:5432/orders');
    expect(system.urls.orders).toBe('http://127.0.0.1:3001');
  });

  it('gives a system beside it (IDEM_PORT_OFFSET) its own ports, databases and queue prefix', () => {
    const first = systemFromEnv({});
    const second = systemFromEnv({ IDEM_PORT_OFFSET: '100' });
    expect(second.urls.orders).toBe('http://127.0.0.1:3101');
    expect(second.urls.console).toBe('http://127.0.0.1:3100');
    expect(second.queuePrefix).toBe('idem_port100');
    for (const service of SERVICES) {
      expect(second.databaseUrls[service]).toBe(`postgresql://postgres@127.0.0.1:5432/${service}_port100`);
      expect(second.databaseUrls[service]).not.toBe(first.databaseUrls[service]);
    }
  });

  it('takes a name from IDEM_SYSTEM', () => {
    expect(systemFromEnv({ IDEM_SYSTEM: 'lab', IDEM_PORT_OFFSET: '200' })).toMatchObject({
      name: 'lab',
      queuePrefix: 'idem_lab',
      databaseUrls: expect.objectContaining({ payments: 'postgresql://postgres@127.0.0.1:5432/payments_lab' }),
    });
  });
});

describe("the console's way into PostgreSQL", () => {
  it("reads every service's database as the read-only console role, and makes its lessons' and explorer's as lessons: never as the superuser", () => {
    const system = describeSystem({ postgresUrl: 'postgresql://postgres@127.0.0.1:5432/', name: 'lab' });
    for (const service of SERVICES) {
      const url = new URL(system.console.databaseUrls[service]);
      expect([url.username, url.host, url.pathname], service).toEqual(['console', '127.0.0.1:5432', `/${service}_lab`]);
    }
    // A server, without a database: the test kit names the databases it makes there.
    expect(system.console.scratchServerUrl).toBe('postgresql://lessons@127.0.0.1:5432');
  });
});

describe('bindRefusal', () => {
  it('refuses the public development key beyond loopback, and nothing else', () => {
    expect(bindRefusal('127.0.0.1', DEVELOPMENT_JWT_SECRET)).toBeUndefined();
    expect(bindRefusal('::1', DEVELOPMENT_JWT_SECRET)).toBeUndefined();
    expect(bindRefusal('0.0.0.0', DEVELOPMENT_JWT_SECRET)).toMatch(/JWT_SECRET of your own/);
    expect(bindRefusal('192.168.1.20', DEVELOPMENT_JWT_SECRET)).toMatch(/development key/);
    expect(bindRefusal('0.0.0.0', 'a-key-of-our-own-0123456789abcdef', 'an-operator-token-0123')).toBeUndefined();
    // Beyond loopback the console and the doubles serve only the operator: there must be one.
    expect(bindRefusal('0.0.0.0', 'a-key-of-our-own-0123456789abcdef')).toMatch(/set ADMIN_TOKEN/);
  });
});

describe('the Redis the native run is given', () => {
  it('is told apart by whether it has the Lua sandbox fixes (7.2.11, 7.4.6, 8.0.4, 8.2.2 and later)', () => {
    const fixed = ['7.2.11', '7.4.6', '7.4.7', '8.0.4', '8.2.2', '8.4.0', '9.0.0'];
    const unfixed = ['6.2.14', '7.0.15', '7.2.10', '7.4.5', '8.0.3', '8.2.1'];
    expect(fixed.filter((version) => !hasLuaSandboxFixes(version))).toEqual([]);
    expect(unfixed.filter(hasLuaSandboxFixes)).toEqual([]);
  });
});
