import { DEVELOPMENT_JWT_SECRET } from '@idem/http';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';

describe('the orders configuration', () => {
  it('binds loopback unless told otherwise', () => {
    expect(loadConfig({}).HOST).toBe('127.0.0.1');
  });

  it('refuses the public development key when HOST serves beyond this machine', () => {
    expect(loadConfig({ JWT_SECRET: DEVELOPMENT_JWT_SECRET }).JWT_SECRET).toBe(DEVELOPMENT_JWT_SECRET);
    expect(() => loadConfig({ JWT_SECRET: DEVELOPMENT_JWT_SECRET, HOST: '0.0.0.0' })).toThrow(/development key/);
    expect(loadConfig({ JWT_SECRET: 'x'.repeat(40), HOST: '0.0.0.0' }).HOST).toBe('0.0.0.0');
  });

  it("takes an identity provider's key set over https only (loopback excepted)", () => {
    expect(loadConfig({ JWT_JWKS_URL: 'https://id.example/.well-known/jwks.json' }).JWT_JWKS_URL).toBeDefined();
    expect(loadConfig({ JWT_JWKS_URL: 'http://127.0.0.1:9999/jwks.json' }).JWT_JWKS_URL).toBeDefined();
    expect(loadConfig({ JWT_JWKS_URL: 'http://localhost:9999/jwks.json' }).JWT_JWKS_URL).toBeDefined();
    expect(() => loadConfig({ JWT_JWKS_URL: 'http://id.example/.well-known/jwks.json' })).toThrow(/https/);
  });

  it('trusts no proxy unless told which: a number of hops or addresses, never every one', () => {
    expect(loadConfig({}).TRUST_PROXY).toBeUndefined();
    expect(loadConfig({ TRUST_PROXY: '1' }).TRUST_PROXY).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, loopback' }).TRUST_PROXY).toEqual(['10.0.0.0/8', 'loopback']);
    expect(() => loadConfig({ TRUST_PROXY: 'true' })).toThrow(/any address/);
  });
});
