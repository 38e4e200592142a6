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

/**
 * One /proc/<pid>/stat in ms: `own` is utime + stime, `withChildren` adds cutime + cstime
 * (the children it has waited for).
 */
function cpuOf(pid: string): { comm: string; own: number; withChildren: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]) * TICK_MS);
    return { comm, own: utime! + stime!, withChildren: utime! + stime! + cutime! + cstime! };
  } catch {
    return undefined; // the process exited while we looked
  }
}

/** CPU ms used so far by one process (0 once it has gone). */
export function cpuOfProcess(pid: number): number {
  return cpuOf(String(pid))?.own ?? 0;
}

/** Resident memory of one process in MB, from /proc/<pid>/status (undefined once it has gone). */
export function rssOfProcess(pid: number): number | undefined {
  try {
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Math.round(Number(kb) / 102.4) / 10;
  } catch {
    return undefined;
  }
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
    const cpu = cpuOf(pid);
    if (cpu?.comm === 'postgres') postgres += cpu.withChildren;
    else if (cpu?.comm.startsWith('redis-server')) redis += cpu.own;
  }
  return { bench: cpuOf(String(process.pid))?.withChildren ?? 0, postgres, redis };
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
