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
});
