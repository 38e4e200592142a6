import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp, listen, type RunningServer } from './app.js';
import { authenticate, callerOf, DEFAULT_TOKEN_CLAIMS, mintCustomerToken } from './callers.js';

// Customer tokens from an identity provider's key set (JWT_JWKS_URL): a real JWKS endpoint on
// a local port, keys made by jose, and the tokens such a provider would issue.
let idp: Server;
let api: RunningServer;
let keys: Awaited<ReturnType<typeof generateKeyPair>>;
const base = () => `http://127.0.0.1:${api.port}`;
const jwksUrlOf = () => `http://127.0.0.1:${(idp.address() as AddressInfo).port}/.well-known/jwks.json`;

beforeAll(async () => {
  keys = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'key-1', alg: 'ES256', use: 'sig' };
  idp = createServer(
    (_req, res) => void res.setHeader('content-type', 'application/json').end(JSON.stringify({ keys: [jwk] })),
  );
  await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve));
  const jwksUrl = jwksUrlOf();
  api = await listen(
    createHttpApp({
      health: {},
      routes: (app) => {
        app.use(
          '/me',
          authenticate({
            tokens: { jwksUrl, ...DEFAULT_TOKEN_CLAIMS },
            operators: [{ name: 'ops', token: 'operator-token-0123' }],
          }),
        );
        app.get('/me', (_req, res) => void res.json(callerOf(res)));
      },
    }),
    0,
  );
});
afterAll(async () => {
  await api.close();
  idp.close();
});

const signed = (sub: string, claims: Record<string, unknown> = {}) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: 'key-1' })
    .setSubject(sub)
    .setIssuer(DEFAULT_TOKEN_CLAIMS.issuer)
    .setAudience(DEFAULT_TOKEN_CLAIMS.audience)
    .setExpirationTime('5m')
    .sign(keys.privateKey);
const me = (token: string) => fetch(`${base()}/me`, { headers: { authorization: `Bearer ${token}` } });

describe('customer tokens from a key set (JWT_JWKS_URL)', () => {
  it("accepts the provider's signed token as that customer, and the operator token as the operator", async () => {
    expect(await (await me(await signed('customer-42'))).json()).toEqual({
      kind: 'customer',
      customerId: 'customer-42',
    });
    expect(await (await me('operator-token-0123')).json()).toEqual({ kind: 'operator', name: 'ops' });
  });

  it('refuses an HS256 token, whatever key signed it: a key set admits only asymmetric algorithms', async () => {
    const hs256 = await mintCustomerToken({ secret: 'a'.repeat(40), ...DEFAULT_TOKEN_CLAIMS }, 'customer-42');
    const res = await me(hs256);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="idem"');
  });

  it('answers 503, not 401, while the key set cannot be fetched: the token may well be valid', async () => {
    const unreachable = await listen(createHttpApp({ health: {}, routes: () => {} }), 0);
    const jwksUrl = `http://127.0.0.1:${unreachable.port}/jwks.json`;
    await unreachable.close(); // nothing listens there any more
    const down = await listen(
      createHttpApp({
        health: {},
        routes: (app) => {
          app.use(authenticate({ tokens: { jwksUrl, ...DEFAULT_TOKEN_CLAIMS }, operators: [] }));
          app.get('/me', (_req, res) => void res.json(callerOf(res)));
        },
      }),
      0,
    );
    try {
      const res = await fetch(`http://127.0.0.1:${down.port}/me`, {
        headers: { authorization: `Bearer ${await signed('customer-43')}` },
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ code: 'dependency_unavailable' });
    } finally {
      await down.close();
    }
  });
});

describe("a token's email", () => {
  const emailOf = async (claims: Record<string, unknown>) => {
    const res = await me(await signed('customer-7', { email: 'ada@example.com', ...claims }));
    const body = (await res.json()) as { email?: string; detail?: string };
    return res.status === 200 ? body.email : `${res.status}: ${body.detail}`;
  };

  it('is the receipt address only when email_verified is the boolean true', async () => {
    expect(await emailOf({ email_verified: true })).toBe('ada@example.com');
    for (const claim of [false, 'false', 'true', 1]) {
      expect(await emailOf({ email_verified: claim })).toMatch(/^401: .*not verified/);
    }
  });

  it('without email_verified is refused unless the service is told its provider never sends one', async () => {
    expect(await emailOf({})).toMatch(/^401: .*no email_verified claim/);
    const lenient = await listen(
      createHttpApp({
        health: {},
        routes: (app) => {
          app.use(
            '/me',
            authenticate({
              tokens: { jwksUrl: jwksUrlOf(), ...DEFAULT_TOKEN_CLAIMS, requireEmailVerified: false },
              operators: [],
            }),
          );
          app.get('/me', (_req, res) => void res.json(callerOf(res)));
        },
      }),
      0,
    );
    try {
      const token = await signed('customer-7', { email: 'ada@example.com' });
      const res = await fetch(`http://127.0.0.1:${lenient.port}/me`, { headers: { authorization: `Bearer ${token}` } });
      expect(await res.json()).toMatchObject({ email: 'ada@example.com' });
    } finally {
      await lenient.close();
    }
  });
});
