import { SERVICE_NAMES, type ServiceName } from '@idem/contracts';
import { createHttpApp, listen, type RunningServer } from '@idem/http';
import { postgresServerUrl, redisUrl } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConsole } from './console.js';

/** A service process started without IDEM_FAULTS_ENABLED=1: it has no /faults at all. */
let plain: RunningServer;
beforeAll(async () => {
  plain = await listen(createHttpApp({ health: {}, routes: () => {} }), 0);
});
afterAll(() => plain.close());

const consoleFor = (adminToken?: string) =>
  createConsole({
    // The fault switches page reads no database.
    databaseUrls: Object.fromEntries(SERVICE_NAMES.map((s) => [s, `${postgresServerUrl}/${s}`])) as Record<
      ServiceName,
      string
    >,
    redisUrl,
    queuePrefix: 'idem_console_test',
    ordersApi: 'http://127.0.0.1:1',
    stripe: { apiBase: 'http://127.0.0.1:1', apiKey: 'sk_test_idem_simulator' },
    processes: { orders: `http://127.0.0.1:${plain.port}` },
    ...(adminToken ? { adminToken } : {}),
  });

async function faultsPage(adminToken?: string): Promise<string> {
  const console_ = consoleFor(adminToken);
  const server = await console_.listen(0);
  try {
    const { port } = server.address() as { port: number };
    return await (await fetch(`http://127.0.0.1:${port}/faults`)).text();
  } finally {
    server.close();
    await console_.close();
  }
}

describe('the console’s fault switches page', () => {
  it('says so when a process was started without switches', async () => {
    const html = await faultsPage('console-test-admin-token-01');
    expect(html).toContain('Switches are unavailable in orders');
    expect(html).toContain('started without IDEM_FAULTS_ENABLED=1');
    expect(html).not.toContain('switch on</button>');
  });

  it('says so when the console has no operator token', async () => {
    expect(await faultsPage()).toContain('The console has no ADMIN_TOKEN');
  });
});
