/**
 * Fault switches: reproducible crashes and rollbacks at the places where the order of
 * operations is the guarantee, so tests and demos can open each failure window on purpose.
 *
 * Configured from the environment and refused unless IDEM_FAULTS_ENABLED=1, so a stray
 * IDEM_FAULTS in production stops the process at start instead of corrupting anything.
 *
 *   IDEM_FAULTS_ENABLED=1
 *   IDEM_FAULTS="crash-after-commit consumer=inventory.order-placed.v1 count=1; crash-after-publish probability=0.2"
 */
export const FAULT_NAMES = [
  /** SIGKILL the consumer process after the inbox transaction committed, before settlement. */
  'crash-after-commit',
  /** Run the handler, then force the inbox transaction to roll back. */
  'rollback-after-handler',
  /** SIGKILL the process after publishing outbox rows (a relay's batch, or a writer's handoff right after its commit), before marking them published. */
  'crash-after-publish',
  /** Publish every message a second time under another broker job id, past BullMQ's dedupe: the duplicate publication the consumers must absorb. */
  'publish-twice',
  /** SIGKILL the payment worker after the provider answered, before recording the result. */
  'crash-after-provider-call',
  /** SIGKILL the email dispatcher after the SMTP server accepted, before marking sent. */
  'crash-after-send',
  /** SIGKILL a RabbitMQ consumer after its retry copy was confirmed, before it acknowledged the delivery that copy replaces. */
  'crash-after-retry-copy',
] as const;

/** One of {@link FAULT_NAMES}: a place in the code where the order of operations is the guarantee. */
export type FaultName = (typeof FAULT_NAMES)[number];

/** When a switch fires: which one, for which target, how often and how many times. */
export interface FaultRule {
  readonly name: FaultName;
  /** A consumer or component name; undefined matches every target. */
  readonly target?: string;
  /** Chance of firing each time the switch is reached. @defaultValue 1 */
  readonly probability: number;
  /** Fire at most this many times in this process. @defaultValue unlimited */
  readonly count?: number;
}

/** IDEM_FAULTS (or a rule sent to the switchboard) names an unknown switch or is not a list of rules. */
export class FaultConfigError extends Error {
  readonly code = 'fault_config_invalid';
}

/** What the code asks at a failure window: does the switch fire here, now? */
export interface Faults {
  /** Whether the switch `name` fires now for `target`; each firing uses up one of its count. */
  fires(name: FaultName, target: string): boolean;
  /** Kills this process with SIGKILL when the switch fires: no cleanup, no settlement. */
  crashIf(name: FaultName, target: string): void;
}

/** Switches that never fire: production, and every caller that passes none. */
export const noFaults: Faults = { fires: () => false, crashIf: () => undefined };

/** Fault switches from fixed rules (IDEM_FAULTS): each rule fires at most `count` times, each time with its `probability`. */
export function createFaults(rules: readonly FaultRule[], random: () => number = Math.random): Faults {
  if (rules.length === 0) return noFaults;
  const fired = new Map<FaultRule, number>();
  const fires = (name: FaultName, target: string): boolean => {
    for (const rule of rules) {
      if (rule.name !== name || (rule.target !== undefined && rule.target !== target)) continue;
      const times = fired.get(rule) ?? 0;
      if (rule.count !== undefined && times >= rule.count) continue;
      if (random() >= rule.probability) continue;
      fired.set(rule, times + 1);
      return true;
    }
    return false;
  };
  return {
    fires,
    crashIf(name, target) {
      if (!fires(name, target)) return;
      process.stderr.write(`fault ${name} fired for ${target}: SIGKILL\n`);
      process.kill(process.pid, 'SIGKILL');
      // Still running: this is PID 1 of a container, whose SIGKILL to itself the kernel ignores
      // (compose runs the services under an init for that). Exit at once instead, no cleanup.
      process.exit(137);
    },
  };
}

/** Parses `IDEM_FAULTS`; throws {@link FaultConfigError} naming the bad part. */
export function parseFaultRules(spec: string): FaultRule[] {
  return spec
    .split(';')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
    .map((entry) => {
      const [name, ...options] = entry.split(/\s+/);
      if (!FAULT_NAMES.includes(name as FaultName)) {
        throw new FaultConfigError(`IDEM_FAULTS: unknown fault "${name}"; known: ${FAULT_NAMES.join(', ')}`);
      }
      let rule: FaultRule = { name: name as FaultName, probability: 1 };
      for (const option of options) {
        const [key, value = ''] = option.split('=', 2);
        if (key === 'consumer' || key === 'target') rule = { ...rule, target: value };
        else if (key === 'count' && /^\d+$/.test(value)) rule = { ...rule, count: Number(value) };
        else if (key === 'probability' && Number(value) >= 0 && Number(value) <= 1) {
          rule = { ...rule, probability: Number(value) };
        } else {
          throw new FaultConfigError(
            `IDEM_FAULTS: "${option}" in "${entry}" is not target=<name>, count=<n> or probability=<0..1>`,
          );
        }
      }
      return rule;
    });
}

/**
 * Fault switches that an operator can change while the process runs (the teaching console
 * does). Each change replaces the rules and starts their counts afresh; a restarted process
 * starts again from IDEM_FAULTS.
 */
export interface FaultSwitchboard extends Faults {
  rules(): readonly FaultRule[];
  replace(rules: readonly FaultRule[]): void;
}

/** Fault switches an operator can change while the process runs (the faults endpoint of a service). */
export function createFaultSwitchboard(
  initial: readonly FaultRule[] = [],
  random: () => number = Math.random,
): FaultSwitchboard {
  let rules = [...initial];
  let faults = createFaults(rules, random);
  return {
    fires: (name, target) => faults.fires(name, target),
    crashIf: (name, target) => faults.crashIf(name, target),
    rules: () => rules,
    replace(next) {
      rules = [...next];
      faults = createFaults(rules, random);
    },
  };
}

/** Whether the faults can be switched at runtime: only in a process started with them enabled. */
export function isSwitchboard(faults: Faults): faults is FaultSwitchboard {
  return 'replace' in faults;
}

/**
 * Reads the fault switches from the environment; refuses them unless explicitly enabled.
 * With IDEM_FAULTS_ENABLED=1 the result is a {@link FaultSwitchboard}, so the switches can also
 * be changed while the process runs; without it nothing can ever switch a fault on.
 */
export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env): Faults {
  const spec = env.IDEM_FAULTS?.trim();
  if (env.IDEM_FAULTS_ENABLED === '1') return createFaultSwitchboard(spec ? parseFaultRules(spec) : []);
  if (!spec) return noFaults;
  throw new FaultConfigError(
    'IDEM_FAULTS is set but IDEM_FAULTS_ENABLED is not 1; fault injection is for tests and demos only, refusing to start',
  );
}
