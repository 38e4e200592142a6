import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time spent by the parts of a measurement, read from /proc: this process (with the
 * children it waited for, e.g. pgbench), every PostgreSQL process (with the backends that
 * already exited, counted by the postmaster), and Redis. On a 2-core machine the three compete
 * for the same cores, so where the CPU goes is what bounds a variant. Empty off Linux or when
 * the servers run elsewhere.
 */
export interface CpuTimes {
  readonly bench: number;
  readonly postgres: number;
  readonly redis: number;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** utime + stime (+ cutime + cstime when `children`) of one /proc/<pid>/stat, in ms. */
function cpuOf(pid: string, children: boolean): { comm: string; ms: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
    return { comm, ms: (utime! + stime! + (children ? cutime! + cstime! : 0)) * TICK_MS };
  } catch {
    return undefined; // the process exited while we looked
  }
}

/** CPU ms used so far by one process (0 once it has gone). */
export function cpuOfProcess(pid: number): number {
  return cpuOf(String(pid), false)?.ms ?? 0;
}

export function cpuSnapshot(): CpuTimes {
  let postgres = 0;
  let redis = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return { bench: 0, postgres: 0, redis: 0 };
  }
  for (const pid of pids) {
    const own = cpuOf(pid, false);
    if (own?.comm === 'postgres') postgres += (cpuOf(pid, true) ?? own).ms;
    else if (own?.comm.startsWith('redis-server')) redis += own.ms;
  }
  return { bench: cpuOf(String(process.pid), true)?.ms ?? 0, postgres, redis };
}

export interface Timed {
  readonly seconds: number;
  /** CPU ms per item, by part. */
  readonly cpu: CpuTimes;
}

/** Times `work` and the CPU each part spent on it, per item. */
export async function timed(items: number, work: () => Promise<unknown>): Promise<Timed> {
  const before = cpuSnapshot();
  const start = performance.now();
  await work();
  const seconds = (performance.now() - start) / 1000;
  const after = cpuSnapshot();
  const per = (key: keyof CpuTimes) => Math.round(((after[key] - before[key]) / items) * 1000) / 1000;
  return { seconds, cpu: { bench: per('bench'), postgres: per('postgres'), redis: per('redis') } };
}
