/**
 * docker-compose.yml as compose would read it on a first start: no .env, interpolated, anchors
 * merged, and the secrets its `secrets` service generates (infra/compose-secrets.sh, run here
 * into a temporary folder). Shared by the compose tests (static and native).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const read = (path: string) => readFileSync(join(root, path), 'utf8');

export type Environment = Record<string, string | undefined>;
export interface ComposeService {
  volumes?: string[];
  user?: string;
  read_only?: boolean;
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
  restart?: string;
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

/** Where the services read the generated secrets (the `secrets` volume). */
export const SECRETS_DIR = '/run/idem-secrets';

/** What infra/compose-secrets.sh makes: every secret by name, and each container's share of them by container. */
export interface GeneratedSecrets {
  readonly all: Record<string, string>;
  readonly shared: Record<string, Record<string, string>>;
}

/** Runs infra/compose-secrets.sh as the `secrets` service does (the Redis users' template in place), with `env` as `.env`. */
export function generateSecrets(env: Record<string, string> = {}): GeneratedSecrets {
  const dir = mkdtempSync(join(tmpdir(), 'idem-compose-secrets-'));
  const filesIn = (folder: string) =>
    Object.fromEntries(
      readdirSync(folder, { withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => [entry.name, readFileSync(join(folder, entry.name), 'utf8')]),
    );
  try {
    execFileSync('sh', [join(root, 'infra/compose-secrets.sh'), join(dir, 'all'), join(dir, 'shared')], {
      stdio: 'pipe',
      env: { ...process.env, ...env, REDIS_USERS_TEMPLATE: join(root, 'deploy/kubernetes/base/redis-users.acl') },
    });
    const containers = readdirSync(join(dir, 'shared'));
    return {
      all: filesIn(join(dir, 'all')),
      shared: Object.fromEntries(containers.map((name) => [name, filesIn(join(dir, 'shared', name))])),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every secret the `secrets` service makes, by name. */
export const generatedSecrets = () => generateSecrets().all;

/** The volume of its own a compose service mounts its secrets from (`secrets-<container>`), if any. */
export const secretsVolumeOf = (service: ComposeService) =>
  (service.volumes ?? [])
    .map((volume) => new RegExp(`^secrets-([\\w-]+):${SECRETS_DIR}:ro$`).exec(volume)?.[1])
    .find(Boolean);

/**
 * A service's environment as its process sees it: each NAME_FILE naming a secret of its volume
 * replaced by NAME with the secret's value, as the images' entrypoint (infra/env-from-files.sh)
 * does. A file its volume does not hold is an error: the container would not start.
 */
export function withSecrets(environment: Environment, secrets: Record<string, string>): Environment {
  return Object.fromEntries(
    Object.entries(environment).map(([name, value]) => {
      const file = name.endsWith('_FILE') && value?.startsWith(`${SECRETS_DIR}/`) ? value : undefined;
      if (!file) return [name, value];
      const secret = secrets[file.slice(SECRETS_DIR.length + 1)];
      if (secret === undefined) throw new Error(`${name} names ${file}, which its secrets volume does not hold`);
      return [name.slice(0, -'_FILE'.length), secret];
    }),
  );
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
  const { all: secrets, shared } = generateSecrets();
  const compose = parse(interpolate(raw, {}), { merge: true }) as { services: Record<string, ComposeService> };
  /** What each service's process sees: its environment with the secrets of its own volume in place. */
  const environments = Object.fromEntries(
    Object.entries(compose.services).map(([name, service]) => {
      const volume = secretsVolumeOf(service);
      return [name, withSecrets(service.environment ?? {}, volume ? (shared[volume] ?? {}) : {})];
    }),
  );
  return { raw, secrets, shared, services: compose.services, environments };
}

/** What infra/Dockerfile says of the images (read where the native run starts deployed services). */
export { bundlesStartedBy, MIGRATE_IMAGE_SERVICES, SERVICE_IMAGE_COMMAND } from '@idem/native-run';
