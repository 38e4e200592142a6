/**
 * What can be checked of `docker compose up` without a Docker engine: the compose file against
 * the Compose Specification, the build inputs it names, the environment each service would get,
 * the published ports, and that Prometheus and Grafana look for what the code really emits.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { configSchema as inventoryConfig, loadConfig as loadInventory } from '../services/inventory/src/config.js';
import {
  configSchema as notificationsConfig,
  loadConfig as loadNotifications,
} from '../services/notifications/src/config.js';
import { configSchema as ordersConfig, loadConfig as loadOrders } from '../services/orders/src/config.js';
import { configSchema as paymentsConfig, loadConfig as loadPayments } from '../services/payments/src/config.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

type Environment = Record<string, string | undefined>;
interface ComposeService {
  build?: { context: string; dockerfile?: string; target?: string; args?: Record<string, string> };
  image?: string;
  container_name?: string;
  environment?: Environment;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: unknown;
}

/** `${VAR:-default}`, `${VAR-default}`, `${VAR}` with the given variables (none: compose with no .env). */
function interpolate(text: string, variables: Record<string, string> = {}): string {
  return text.replace(/\$\{(\w+)(?:(:?-)([^}]*))?\}/g, (_all, name: string, op: string | undefined, fallback = '') => {
    const value = variables[name];
    if (op === ':-') return value ? value : fallback;
    if (op === '-') return value ?? fallback;
    return value ?? '';
  });
}

const raw = read('docker-compose.yml');
const compose = parse(interpolate(raw), { merge: true }) as { services: Record<string, ComposeService> };
const services = compose.services;

const SERVICES = {
  orders: { port: 3001, config: ordersConfig, load: loadOrders },
  inventory: { port: 3002, config: inventoryConfig, load: loadInventory },
  payments: { port: 3003, config: paymentsConfig, load: loadPayments },
  notifications: { port: 3004, config: notificationsConfig, load: loadNotifications },
} as const;
/** Read outside the services' config modules: tracing (@idem/observability) and fault switches (@idem/faults). */
const READ_ELSEWHERE = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'IDEM_FAULTS', 'IDEM_FAULTS_ENABLED'];

describe('docker-compose.yml', () => {
  it('is valid against the Compose Specification', () => {
    const require = createRequire(import.meta.url);
    const schemaPath = join(dirname(require.resolve('dclint/package.json')), 'schemas/compose.schema.json');
    const { $schema: _draft, ...schema } = JSON.parse(readFileSync(schemaPath, 'utf8')) as Record<string, unknown>;
    const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
    const valid = validate(compose);
    expect(
      valid ? [] : validate.errors!.map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`),
    ).toEqual([]);
  });

  it('works with no .env: every variable it uses has a default, and .env.example documents each', () => {
    const used = [...raw.matchAll(/\$\{(\w+)(:?-)?/g)];
    expect(used.filter(([, , op]) => !op).map(([, name]) => name)).toEqual([]);
    const documented = read('.env.example');
    expect(
      [...new Set(used.map(([, name]) => name!))].filter((name) => !new RegExp(`^${name}=`, 'm').test(documented)),
    ).toEqual([]);
  });

  it('builds from contexts, Dockerfiles and targets that exist, for packages that exist', () => {
    const dockerfile = read('infra/Dockerfile');
    const packages = ['packages', 'services', 'infra'].flatMap((group) =>
      readdirSync(join(root, group))
        .filter((name) => existsSync(join(root, group, name, 'package.json')))
        .map((name) => (JSON.parse(read(`${group}/${name}/package.json`)) as { name: string }).name),
    );
    for (const [name, service] of Object.entries(services)) {
      if (!service.build) continue;
      expect(statSync(join(root, service.build.context)).isDirectory(), name).toBe(true);
      expect(existsSync(join(root, service.build.context, service.build.dockerfile ?? 'Dockerfile')), name).toBe(true);
      expect(dockerfile, `${name} target`).toMatch(new RegExp(`^FROM .+ AS ${service.build.target}$`, 'm'));
      if (service.build.args?.PACKAGE) expect(packages, name).toContain(service.build.args.PACKAGE);
    }
  });

  it('gives every service process an environment its configuration accepts, with no unknown variable', () => {
    for (const [service, { config, load }] of Object.entries(SERVICES)) {
      for (const name of [service, `${service}-api`]) {
        const environment = services[name]?.environment;
        expect(environment, name).toBeDefined();
        // Compose sets a variable written as `VAR:` or `VAR: ''` to the empty string.
        const env = Object.fromEntries(Object.entries(environment!).map(([k, v]) => [k, v == null ? '' : String(v)]));
        expect(() => load(env), name).not.toThrow();
        const known = [...Object.keys(config.shape), ...READ_ELSEWHERE];
        expect(
          Object.keys(environment!).filter((key) => !known.includes(key)),
          name,
        ).toEqual([]);
        expect(Number(env.PORT), name).toBe(SERVICES[service as keyof typeof SERVICES].port);
      }
    }
  });

  it('publishes every port in the design: the four APIs, the simulator, SMTP and its UI, PostgreSQL, Redis', () => {
    const published = Object.values(services).flatMap((s) =>
      (s.ports ?? []).map((p) => Number(String(p).split(':')[0])),
    );
    for (const port of [3001, 3002, 3003, 3004, 12111, 1025, 8025, 5432, 6379]) expect(published).toContain(port);
  });

  it('leaves the scalable consumer services without a container name or a published port', () => {
    for (const name of Object.keys(SERVICES)) {
      expect(services[name]!.container_name, name).toBeUndefined();
      expect(services[name]!.ports, name).toBeUndefined();
    }
  });

  it('starts services only once the migration finished and their dependencies are healthy', () => {
    for (const name of Object.keys(SERVICES).flatMap((s) => [s, `${s}-api`])) {
      expect(services[name]!.depends_on?.migrate?.condition, name).toBe('service_completed_successfully');
      expect(services[name]!.depends_on?.redis?.condition, name).toBe('service_healthy');
      expect(services[name]!.healthcheck, name).toBeDefined();
    }
    expect(services.migrate!.depends_on?.postgres?.condition).toBe('service_healthy');
  });
});

describe('Prometheus and Grafana', () => {
  const prometheus = parse(read('infra/prometheus/prometheus.yml')) as {
    rule_files: string[];
    scrape_configs: { job_name: string; dns_sd_configs: { names: string[]; port: number }[] }[];
  };

  it('scrape every service process under its compose name and port', () => {
    const targets = prometheus.scrape_configs.flatMap((job) =>
      job.dns_sd_configs.flatMap((sd) => sd.names.map((name) => [name, sd.port] as const)),
    );
    for (const [name, port] of targets) {
      expect(services[name], name).toBeDefined();
      expect(Number(services[name]!.environment?.PORT), name).toBe(port);
    }
    const scraped = targets.map(([name]) => name);
    for (const service of Object.keys(SERVICES))
      expect(scraped).toEqual(expect.arrayContaining([service, `${service}-api`]));
    for (const file of prometheus.rule_files) expect(existsSync(join(root, 'infra/prometheus', file)), file).toBe(true);
  });

  it('refer only to metrics the code emits', () => {
    const emitted = new Set(
      sourceFiles(['packages', 'services']).flatMap((file) =>
        [...readFileSync(file, 'utf8').matchAll(/['"](idem_[a-z_]+)['"]/g)].map((m) => m[1]!),
      ),
    );
    const referenced = [read('infra/grafana/dashboards/idem.json'), read('infra/prometheus/alerts.yml')].flatMap(
      (text) => [...text.matchAll(/\b(idem_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, '')),
    );
    expect(referenced.length).toBeGreaterThan(10);
    expect([...new Set(referenced)].filter((metric) => !emitted.has(metric))).toEqual([]);
  });

  it('provision the Prometheus datasource the dashboard uses', () => {
    const datasource = parse(read('infra/grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: { uid: string; url: string }[];
    };
    expect(datasource.datasources[0]).toMatchObject({ uid: 'prometheus', url: 'http://prometheus:9090' });
    const dashboard = JSON.parse(read('infra/grafana/dashboards/idem.json')) as {
      panels: { datasource: { uid: string } }[];
    };
    expect(dashboard.panels.every((p) => p.datasource.uid === 'prometheus')).toBe(true);
  });
});

function sourceFiles(groups: string[]): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'generated' || entry.name === 'dist') continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path.endsWith('.ts') && !path.endsWith('.spec.ts')) files.push(path);
    }
  };
  for (const group of groups) walk(join(root, group));
  return files;
}
