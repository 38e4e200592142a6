import { describe, expect, it } from 'vitest';
import { operatorMatcher, operatorsFromEnv, operatorTokensProblem } from './operators.js';

describe('operators', () => {
  it('come from ADMIN_TOKENS by name and ADMIN_TOKEN as "operator"', () => {
    expect(
      operatorsFromEnv({
        ADMIN_TOKENS: 'alice:alice-token-0123456789, bob:bob:token:0123456789',
        ADMIN_TOKEN: 'x'.repeat(16),
      }),
    ).toEqual([
      { name: 'alice', token: 'alice-token-0123456789' },
      { name: 'bob', token: 'bob:token:0123456789' },
      { name: 'operator', token: 'x'.repeat(16) },
    ]);
  });

  it('refuse ADMIN_TOKENS written wrong: no name, a short token, a name twice', () => {
    expect(operatorTokensProblem('alice:alice-token-0123456789')).toBeUndefined();
    expect(operatorTokensProblem('just-a-token-0123456789')).toMatch(/name:token/);
    expect(operatorTokensProblem('alice:short')).toMatch(/shorter than 16/);
    expect(operatorTokensProblem('a:aaaaaaaaaaaaaaaaaa,a:bbbbbbbbbbbbbbbbbb')).toMatch(/twice/);
  });

  it('are told apart by their token, and a token of nobody is nobody', () => {
    const named = operatorMatcher(
      operatorsFromEnv({ ADMIN_TOKENS: 'alice:alice-token-0123456789,bob:bob-token-0123456789' }),
    )!;
    expect(named('bob-token-0123456789')).toBe('bob');
    expect(named('alice-token-0123456789')).toBe('alice');
    expect(named('mallory-token-0123456789')).toBeUndefined();
    expect(operatorMatcher([])).toBeUndefined();
  });
});
