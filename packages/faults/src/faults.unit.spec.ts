import { describe, expect, it } from 'vitest';
import { createFaults, faultsFromEnv, isSwitchboard, parseFaultRules } from './faults.js';

describe('fault switches', () => {
  it('parses a rule per entry with target, count and probability', () => {
    expect(
      parseFaultRules('crash-after-commit consumer=a.b.v1 count=1; rollback-after-handler probability=0.5'),
    ).toEqual([
      { name: 'crash-after-commit', target: 'a.b.v1', count: 1, probability: 1 },
      { name: 'rollback-after-handler', probability: 0.5 },
    ]);
  });

  it('rejects an unknown fault name or option with a message naming it', () => {
    expect(() => parseFaultRules('explode')).toThrow(/unknown fault "explode"/);
    expect(() => parseFaultRules('crash-after-commit probability=2')).toThrow(/probability=2/);
  });

  it('fires only for its target and only as many times as its count', () => {
    const faults = createFaults(parseFaultRules('rollback-after-handler consumer=x count=2'));
    expect(faults.fires('rollback-after-handler', 'y')).toBe(false);
    expect(faults.fires('crash-after-commit', 'x')).toBe(false);
    expect([1, 2, 3].map(() => faults.fires('rollback-after-handler', 'x'))).toEqual([true, true, false]);
  });

  it('fires with the configured probability', () => {
    const rolls = [0.1, 0.9];
    const faults = createFaults(parseFaultRules('publish-twice probability=0.5'), () => rolls.shift() ?? 0);
    expect(faults.fires('publish-twice', 'relay')).toBe(true);
    expect(faults.fires('publish-twice', 'relay')).toBe(false);
  });

  it('refuses to enable faults without IDEM_FAULTS_ENABLED=1', () => {
    expect(() => faultsFromEnv({ IDEM_FAULTS: 'crash-after-commit' })).toThrow(/IDEM_FAULTS_ENABLED/);
    expect(faultsFromEnv({}).fires('crash-after-commit', 'x')).toBe(false);
    expect(
      faultsFromEnv({ IDEM_FAULTS: 'crash-after-commit', IDEM_FAULTS_ENABLED: '1' }).fires('crash-after-commit', 'x'),
    ).toBe(true);
  });

  it('can be switched at runtime only in a process started with IDEM_FAULTS_ENABLED=1', () => {
    expect(isSwitchboard(faultsFromEnv({}))).toBe(false);
    const faults = faultsFromEnv({ IDEM_FAULTS_ENABLED: '1' });
    expect(isSwitchboard(faults)).toBe(true);
    if (!isSwitchboard(faults)) return;
    expect(faults.fires('publish-twice', 'publisher')).toBe(false);
    faults.replace(parseFaultRules('publish-twice count=1'));
    expect(faults.rules()).toEqual([{ name: 'publish-twice', probability: 1, count: 1 }]);
    expect(faults.fires('publish-twice', 'publisher')).toBe(true);
    expect(faults.fires('publish-twice', 'publisher')).toBe(false);
    faults.replace(faults.rules()); // a new switch: its count starts afresh
    expect(faults.fires('publish-twice', 'publisher')).toBe(true);
    faults.replace([]);
    expect(faults.fires('publish-twice', 'publisher')).toBe(false);
  });
});
