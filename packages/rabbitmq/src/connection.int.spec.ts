/**
 * amqps:// with the TLS options passed through to the socket: a TLS listener of the test's own
 * (its own certificate authority, a client certificate required) in front of the machine's real
 * RabbitMQ records what each handshake carried, and pipes the AMQP session on.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import { rabbitmqUrl, uniqueName } from '@idem/testkit';
import { connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookLent, catalogue, policy } from '../test/fixtures.js';
import { queueOf } from './topology.js';
import { deleteTopology, rabbitmq } from './transport.js';

const prefix = uniqueName('idem_tls');
const CONSUMER = 'billing.book-lent.v1';
const AUDIT = 'audit.book-lent.v1';
const dir = mkdtempSync(join(tmpdir(), 'idem-tls-'));

/** A key and a certificate for `name`, signed by the test's own authority (made first, self-signed). */
function certificate(name: string, { authority = false } = {}) {
  const file = (ext: string) => join(dir, `${name}.${ext}`);
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', file('key')];
  if (authority) {
    execFileSync('openssl', ['req', '-x509', ...key, '-out', file('crt'), '-subj', `/CN=${name}`, '-days', '1']);
  } else {
    writeFileSync(file('ext'), `subjectAltName=DNS:${name}\n`);
    execFileSync('openssl', ['req', ...key, '-out', file('csr'), '-subj', `/CN=${name}`]);
    const signed = ['-CA', join(dir, 'idem-test-ca.crt'), '-CAkey', join(dir, 'idem-test-ca.key'), '-CAcreateserial'];
    const out = ['-out', file('crt'), '-days', '1', '-extfile', file('ext')];
    execFileSync('openssl', ['x509', '-req', '-in', file('csr'), ...signed, ...out]);
  }
  return { key: readFileSync(file('key')), cert: readFileSync(file('crt')) };
}

const authority = certificate('idem-test-ca', { authority: true });
const server = certificate('rabbit.test');
const client = certificate('billing');
const rabbit = new URL(rabbitmqUrl);
/** What each TLS session the listener accepted carried: the name asked for (SNI), the client's certificate. */
const sessions: { servername: string | false | null; client: unknown }[] = [];
let listener: Server;
let url: string;

beforeAll(async () => {
  listener = createServer(
    { ...server, ca: [authority.cert], requestCert: true, rejectUnauthorized: true },
    (socket: TLSSocket) => {
      sessions.push({ servername: socket.servername, client: socket.getPeerCertificate().subject?.CN });
      const upstream = tcpConnect(Number(rabbit.port || 5672), rabbit.hostname);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    },
  );
  listener.on('tlsClientError', () => {}); // a refused handshake: the test says which
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  url = `amqps://${rabbit.username}:${rabbit.password}@127.0.0.1:${(listener.address() as AddressInfo).port}${rabbit.pathname}`;
});
afterAll(async () => {
  await deleteTopology(
    { url: rabbitmqUrl, prefix, policy },
    { consumers: [CONSUMER, AUDIT], contracts: Object.keys(catalogue.contracts) },
  );
  await new Promise((resolve) => listener.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('an amqps:// URL with TLS options', () => {
  it('checks RabbitMQ’s certificate against the CA given, asks for the servername given, shows the client certificate: the session runs', async () => {
    const transport = rabbitmq({
      url,
      tls: { ca: [authority.cert], cert: client.cert, key: client.key, servername: 'rabbit.test' },
      prefix,
      policy,
    });
    await transport.subscribe({ catalogue, consumer: CONSUMER });
    // The loans' other consumer, subscribed as well (not through the proxy): the library publishes
    // once every consumer of its catalogue subscribed.
    await rabbitmq({ url: rabbitmqUrl, prefix, policy }).subscribe({ catalogue, consumer: AUDIT });
    const publisher = transport.createPublisher({ catalogue });
    await publisher.publish([bookLent()]).finally(() => publisher.close());
    expect(sessions).toEqual([
      { servername: 'rabbit.test', client: 'billing' },
      { servername: 'rabbit.test', client: 'billing' },
    ]);
    const model = await connect(rabbitmqUrl);
    try {
      const channel = await model.createChannel();
      expect((await channel.checkQueue(queueOf({ prefix }, CONSUMER))).messageCount).toBe(1);
    } finally {
      await model.close();
    }
  });

  it('refuses a RabbitMQ whose certificate the CA given did not sign, or that is not the servername given', async () => {
    sessions.length = 0;
    const withCa = (tls: object) =>
      rabbitmq({ url, prefix, policy, tls: { cert: client.cert, key: client.key, ...tls } });
    const publish = async (tls: object) => {
      const publisher = withCa(tls).createPublisher({ catalogue, timeoutMs: 5000 });
      await publisher.publish([bookLent()]).finally(() => publisher.close());
    };
    await expect(publish({ servername: 'rabbit.test' })).rejects.toThrow(/self[- ]signed|unable to verify/);
    await expect(publish({ ca: [authority.cert], servername: 'other.test' })).rejects.toThrow(/altnames|Hostname/);
    expect(sessions).toEqual([]);
  });
});
