import { spawn } from 'node:child_process';
import type { FaultName } from '@idem/faults';

/** A place where the order of operations is the guarantee, and where `@idem/faults` can kill the process. */
export type CrashWindow = Extract<FaultName, `crash-${string}`>;

/** The program to crash, and where. */
export interface CrashOptions {
  /** The program and its arguments, e.g. `[process.execPath, 'dist/consumer.js']`. Its faults come from the environment (`faultsFromEnv()`). */
  readonly command: readonly [string, ...string[]];
  /** Where it dies: `crash-after-commit` (a consumer), `crash-after-publish` (a relay or handoff), … */
  readonly window: CrashWindow;
  /** The consumer or component the switch fires for. @defaultValue any */
  readonly target?: string;
  /** Added to this process's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** How long the program may run without reaching the window; it is killed then. @defaultValue 30000 */
  readonly timeoutMs?: number;
}

/** How the program died: what it printed up to its crash. */
export interface Crash {
  readonly stdout: string;
  readonly stderr: string;
}

/** The program ended, or ran out of time, without dying in the window it was given. */
export class CrashWindowNotReached extends Error {
  constructor(
    message: string,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'CrashWindowNotReached';
  }
}

/**
 * Runs a program of yours with the fault switch `window` set to fire once (for `target`), and
 * resolves once the switch killed it there — SIGKILL, no cleanup, as a power cut would — so a test
 * can restart it and check that the effect happened once. Rejects with
 * {@link CrashWindowNotReached} when it exits otherwise or is still running after `timeoutMs`.
 */
export function crashAt({ command, window, target, env = {}, timeoutMs = 30_000 }: CrashOptions): Promise<Crash> {
  const [program, ...args] = command;
  const rule = `${window} count=1${target === undefined ? '' : ` target=${target}`}`;
  const child = spawn(program, args, {
    env: { ...process.env, ...env, IDEM_FAULTS_ENABLED: '1', IDEM_FAULTS: rule },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // The switch says where it fired, then kills (exit 137 where the kernel ignores it: PID 1).
      const fired = stderr.includes(`fault ${window} fired for ${target ?? ''}`);
      if (fired && (signal === 'SIGKILL' || code === 137)) return resolve({ stdout, stderr });
      const ended = fired
        ? `died by ${signal ?? code}`
        : signal === 'SIGKILL'
          ? `ran ${timeoutMs} ms`
          : `ended (${signal ?? code})`;
      reject(new CrashWindowNotReached(`${program} ${ended} without crashing at ${window}`, stdout, stderr));
    });
  });
}
