/**
 * docker-compose.yml as compose would read it on a first start: with the .env that
 * infra/compose-env.sh writes from .env.example, interpolated, anchors merged. Shared by the
 * compose tests (static and native).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const read = (path: string) => readFileSync(join(root, path), 'utf8');

export type Environment = Record<string, string | undefined>;
export interface ComposeService {
  volumes?: string[];
  build?: { context: string; dockerfile?: string; target?: string; args?: Record<string, string> };
  image?: string;
  pull_policy?: string;
  stop_grace_period?: string;
  command?: string[];
  container_name?: string;
  environment?: Environment;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  entrypoint?: string[];
  healthcheck?: unknown;
}

/** `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`, `${VAR}` with the given variables, and `$$` as `$`, as compose does. */
export function interpolate(text: string, variables: Record<string, string>): string {
  return text.replace(
    /\$\$|\$\{(\w+)(?:(:?[-?])([^}]*))?\}/g,
    (all, name: string, op: string | undefined, arg = '') => {
      if (all === '$$') return '$';
      const value = variables[name];
      if (op === ':-') return value ? value : arg;
      if (op === '-') return value ?? arg;
      if (op === ':?' && !value) throw new Error(`required variable ${name} is missing a value: ${arg}`);
      return value ?? '';
    },
  );
}

/** Runs infra/compose-env.sh in a copy of what it reads; returns the .env it writes. */
export function generatedEnv(): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-compose-env-'));
  try {
    cpSync(join(root, '.env.example'), join(dir, '.env.example'));
    mkdirSync(join(dir, 'infra'));
    cpSync(join(root, 'infra/compose-env.sh'), join(dir, 'infra/compose-env.sh'));
    execFileSync('sh', [join(dir, 'infra/compose-env.sh')], { stdio: 'pipe' });
    return parseEnv(readFileSync(join(dir, '.env'), 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function parseEnv(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split('\n')
      .filter((line) => /^\w+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

export function loadCompose() {
  const raw = read('docker-compose.yml');
  const dotEnv = generatedEnv();
  const compose = parse(interpolate(raw, dotEnv), { merge: true }) as { services: Record<string, ComposeService> };
  return { raw, dotEnv, services: compose.services };
}

/** infra/Dockerfile's command for the `service` target: the instrumentation entry first, then the service. */
export const SERVICE_IMAGE_COMMAND = JSON.parse(
  /FROM runtime AS service[\s\S]*?\nCMD (\[.*\])/.exec(read('infra/Dockerfile'))![1]!,
) as string[];

/** The services whose migrations infra/Dockerfile's migrate image carries (its `for service in …` loop). */
export const MIGRATE_IMAGE_SERVICES = /for service in ([\w ]+); do/.exec(read('infra/Dockerfile'))![1]!.split(' ');

/** The bundles a command starts (`dist/….js`), relative to the package. */
export const bundlesStartedBy = (command: readonly string[]) =>
  command.filter((arg) => /^(\.\/)?dist\/.*\.js$/.test(arg)).map((arg) => arg.replace(/^\.\//, ''));
