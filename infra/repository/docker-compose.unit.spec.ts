/**
 * What can be checked of `docker compose up` without a Docker engine: the compose file against
 * the Compose Specification, the secrets and ports a first start on a laptop needs, the build
 * inputs it names, the environment each service would get, readiness and stop timing, and that
 * Prometheus and Grafana look for what the code really emits, aggregated as replicas need.
 * infra/repository/compose-services.int.spec.ts runs the PostgreSQL init script and Redis's command for real.
 */
import { createHmac } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { SHUTDOWN_TIMEOUT_MS } from '@idem/runtime';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEFAULT_PORTS } from '@idem/native-run';
import { aclFileLine, consoleRedisUser, scriptWatcherRedisUser } from '@idem/messaging';

import { ENTRYPOINTS } from '../../scripts/build.js';
import {
  bundlesStartedBy,
  generatedSecrets,
  generateSecrets,
  loadCompose,
  secretsVolumeOf,
  parseEnv,
  read,
  root,
  SECRETS_DIR,
  SERVICE_IMAGE_COMMAND,
} from './compose-file.js';
import { SERVICE_CONFIGS as SERVICES, unknownVariables } from './service-configs.js';

const { raw, secrets, shared, services, environments } = loadCompose();
const compose = { services };
const example = parseEnv(read('.env.example'));
const used = [...raw.matchAll(/\$\{(\w+)(:?[-?])?([^}]*)\}/g)].map(([, name, op, arg]) => ({ name: name!, op, arg }));
/** The idem processes: every service compose builds from infra/Dockerfile's service target and keeps running (not the one-shot seed). */
const idemProcesses = Object.entries(services).filter(([, s]) => s.build?.target === 'service' && s.restart !== 'no');

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

  it('has no default secrets and needs nothing before `up`: the secrets service makes each on the first start', () => {
    // Every password, token and key is random, made by infra/compose-secrets.sh; none is a variable.
    const services_ = Object.keys(SERVICES);
    const made = Object.keys(secrets).filter((name) => !/-url$|\.acl$|\.htpasswd$/.test(name));
    expect(made.sort()).toEqual(
      [
        'postgres-password',
        'console-db-password',
        'lessons-db-password',
        'redis-password',
        'grafana-admin-password',
        'admin-token',
        'jwt-secret',
        'simulator-api-key',
        'stripe-api-key',
        'console-stripe-api-key',
        'console-redis-password',
        'console-customer-token',
        'script-watcher-redis-password',
        'mailpit-api-password',
        'mailpit-smtp-password',
        ...services_.flatMap((s) => [
          `${s}-db-password`,
          `${s}-runtime-db-password`,
          `${s}-redis-password`,
          `${s}-faults-token`,
          `${s}-admin-token`,
        ]),
      ].sort(),
    );
    for (const name of made.filter((n) => !n.includes('api-key') && n !== 'console-customer-token'))
      expect(secrets[name], name).toMatch(/^[0-9a-f]{48}$/);
    // The simulator's key is its own, never the public placeholder; without a key in .env, payments uses it.
    expect(secrets['simulator-api-key']).toMatch(/^sk_test_idem_simulator_[0-9a-f]{48}$/);
    expect(secrets['stripe-api-key']).toBe(secrets['simulator-api-key']);
    expect(generatedSecrets()['jwt-secret']).not.toBe(secrets['jwt-secret']); // fresh per system
    expect(used.filter((v) => v.op === ':?')).toEqual([]); // compose starts without a .env
    expect(raw).not.toMatch(/PASSWORD: |ADMIN_TOKEN: |JWT_SECRET: |_URL: \S*:\/\/[^$\s]*:[^@\s]*@/);
    // Made before anything that reads them, as root only to write the volumes.
    expect(services.secrets!.entrypoint).toEqual(['sh', '/compose-secrets.sh', SECRETS_DIR, '/run/idem-shared']);
    expect(services.secrets!.volumes).toContain('./infra/compose-secrets.sh:/compose-secrets.sh:ro');
    expect(services.secrets!.volumes).toContain(`secrets:${SECRETS_DIR}`);
    for (const [name, service] of Object.entries(services)) {
      if (name === 'secrets') continue;
      // Nobody else mounts the volume that holds them all; each reads only a volume of its own.
      expect(
        (service.volumes ?? []).filter((v) => v.startsWith('secrets:')),
        name,
      ).toEqual([]);
      const volume = secretsVolumeOf(service);
      const reads = Object.values(service.environment ?? {}).some((v) => String(v).startsWith(SECRETS_DIR));
      if (reads) expect(volume, `${name} mounts the secrets it reads`).toBe(name);
      if (volume) expect(services.secrets!.volumes).toContain(`secrets-${volume}:/run/idem-shared/${volume}`);
    }
    expect(services.postgres!.entrypoint!.join(' ')).toContain(
      'POSTGRES_PASSWORD=$(cat /run/idem-secrets/postgres-password) exec docker-entrypoint.sh',
    );
    for (const name of ['postgres', 'redis', 'grafana', 'stripe-sim'])
      expect(services[name]!.depends_on?.secrets?.condition, name).toBe('service_completed_successfully');
  });

  it("gives each container only its own secrets: no worker holds the operator token or the customer-token key, each service's switches token only its processes and the console, only PostgreSQL its superuser password", () => {
    const holders = (secret: string) =>
      Object.entries(shared)
        .filter(([, files]) => secret in files)
        .map(([container]) => container)
        .sort();
    expect(holders('postgres-password')).toEqual(['postgres']);
    // The console's own (its login): no API takes it.
    expect(holders('admin-token')).toEqual(['console']);
    expect(holders('jwt-secret')).toEqual(['orders-api']);
    expect(holders('redis-password')).toEqual(['redis']);
    expect(holders('script-watcher-redis-password')).toEqual(['redis-script-watcher']);
    for (const service of Object.keys(SERVICES)) {
      expect(holders(`${service}-database-url`), service).toEqual([service, `${service}-api`].sort());
      expect(holders(`${service}-redis-url`), service).toEqual([service, `${service}-api`].sort());
      expect(Object.keys(environments[service]!), service).not.toContain('ADMIN_TOKEN');
      // Its API's operator token: the API, and the one-shot seed for the two it puts the demo shop into.
      const seeds = service === 'orders' || service === 'inventory' ? ['seed'] : [];
      expect(holders(`${service}-admin-token`), service).toEqual([`${service}-api`, ...seeds].sort());
      // Its switches token, its API's too, and the console's for it: no other process holds it.
      expect(holders(`${service}-faults-token`), service).toEqual(['console', service, `${service}-api`].sort());
      for (const container of [service, `${service}-api`])
        expect(environments[container]!.FAULTS_TOKEN, container).toBe(secrets[`${service}-faults-token`]);
      expect(environments.console![`${service.toUpperCase()}_FAULTS_TOKEN`]).toBe(secrets[`${service}-faults-token`]);
    }
    // Values the user gives in .env reach the services as files too, never as their configuration.
    expect(environments.payments!.STRIPE_API_KEY).toBe(secrets['stripe-api-key']);
    expect(new URL(environments.notifications!.SMTP_URL!).host).toBe('mailpit:1025');
    expect(generateSecrets({ SMTP_URL: 'smtps://u:p@smtp.example.com' }).shared.notifications!['smtp-url']).toBe(
      'smtps://u:p@smtp.example.com',
    );
    expect(environments['stripe-sim']!.STRIPE_SIM_API_KEY).toBe(secrets['simulator-api-key']);
    // The console's checker reads the simulator with its key; a live key given in .env reaches payments only.
    expect(environments.console!.STRIPE_API_KEY).toBe(secrets['stripe-api-key']);
    const live = generateSecrets({ STRIPE_API_KEY: 'sk_live_0123456789abcdef' }).shared;
    const liveHolders = Object.entries(live)
      .filter(([, files]) => Object.values(files).includes('sk_live_0123456789abcdef'))
      .map(([container]) => container);
    expect(liveHolders.sort()).toEqual(['payments', 'payments-api']);
    expect(live.console!['console-stripe-api-key']).toBe('');
  });

  it("gives the console a customer token for `console` that lasts 30 days, and not the key that signs every customer's", () => {
    expect(Object.keys(environments.console!)).not.toContain('JWT_SECRET');
    const token = environments.console!.CUSTOMER_TOKEN!;
    const [header = '', payload = '', signature] = token.split('.');
    // What the orders API checks (jose, HS256): its key's signature over the header and payload.
    const key = environments['orders-api']!.JWT_SECRET!;
    expect(signature).toBe(createHmac('sha256', key).update(`${header}.${payload}`).digest('base64url'));
    const decoded = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>;
    expect(decoded(header)).toMatchObject({ alg: 'HS256' });
    const claims = decoded(payload);
    expect(claims).toMatchObject({
      sub: 'console',
      email: 'student@example.com',
      email_verified: true,
      iss: 'idem',
      aud: 'idem-orders',
    });
    const now = Date.now() / 1000;
    expect(Number(claims.iat)).toBeGreaterThan(now - 60);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(30 * 86_400);
  });

  it("gives each API an operator token of its own: notifications' opens no other API, the console's none", () => {
    const apis = Object.keys(SERVICES).map((service) => `${service}-api`);
    const tokenOf = (container: string) => environments[container]!.ADMIN_TOKEN;
    for (const api of apis) expect(tokenOf(api), api).toMatch(/^[0-9a-f]{48}$/);
    expect(new Set(apis.map(tokenOf)).size).toBe(apis.length);
    expect(tokenOf('orders-api')).not.toBe(tokenOf('notifications-api'));
    expect(apis.map(tokenOf)).not.toContain(environments.console!.ADMIN_TOKEN);
    // The seed sends each API its own.
    expect(environments.seed!.ORDERS_ADMIN_TOKEN).toBe(tokenOf('orders-api'));
    expect(environments.seed!.INVENTORY_ADMIN_TOKEN).toBe(tokenOf('inventory-api'));
  });

  it('documents every other variable in .env.example, with the default compose uses', () => {
    const optional = used.filter((v) => v.op !== ':?');
    expect(optional.filter((v) => !v.op).map((v) => v.name)).toEqual([]);
    for (const { name, arg } of optional) {
      expect(example[name], `${name} in .env.example`).toBeDefined();
      if (name.endsWith('_HOST_PORT')) expect(example[name], name).toBe(arg);
    }
  });

  it("puts Mailpit's API and SMTP server behind logins of their own: the console holds the API's, notifications the SMTP server's", () => {
    const mailpit = services.mailpit!;
    // Mailpit reads the files itself (its own _FILE variables, not the images' entrypoint).
    expect(mailpit.environment).toMatchObject({
      MP_UI_AUTH_FILE: `${SECRETS_DIR}/mailpit-ui.htpasswd`,
      MP_SMTP_AUTH_FILE: `${SECRETS_DIR}/mailpit-smtp.htpasswd`,
      MP_SMTP_AUTH_ALLOW_INSECURE: 'true',
    });
    expect(secretsVolumeOf(mailpit)).toBe('mailpit');
    // A copied .env.example keeps that login: an SMTP_URL there would replace it, and be refused.
    expect(example.SMTP_URL).toBe('');
    expect(mailpit.depends_on?.secrets?.condition).toBe('service_completed_successfully');
    // An htpasswd line each; a plain password is one (Mailpit's htpasswd reader takes it last).
    expect(shared.mailpit).toEqual({
      'mailpit-ui.htpasswd': `idem:${secrets['mailpit-api-password']}`,
      'mailpit-smtp.htpasswd': `notifications:${secrets['mailpit-smtp-password']}`,
    });
    // The console reads mail with the API's login (basic authentication), never the operator token.
    const api = new URL(environments.console!.MAIL_API!);
    expect([api.origin, api.username, api.password]).toEqual([
      'http://mailpit:8025',
      'idem',
      secrets['mailpit-api-password'],
    ]);
    for (const name of ['notifications', 'notifications-api']) {
      const smtp = new URL(environments[name]!.SMTP_URL!);
      expect([smtp.host, smtp.username, smtp.password], name).toEqual([
        'mailpit:1025',
        'notifications',
        secrets['mailpit-smtp-password'],
      ]);
    }
    const holders = (password: string) =>
      Object.entries(shared)
        .filter(([, files]) => Object.values(files).some((value) => value.includes(secrets[password]!)))
        .map(([container]) => container)
        .sort();
    // The console reads receipts with it; notifications looks up a send whose reply was lost.
    expect(holders('mailpit-api-password')).toEqual(['console', 'mailpit', 'notifications', 'notifications-api']);
    expect(holders('mailpit-smtp-password')).toEqual(['mailpit', 'notifications', 'notifications-api']);
  });

  it('publishes every port on 127.0.0.1, each configurable, clear of a native run and its PostgreSQL and Redis', () => {
    const native = [5432, 6379, ...[0, 100].flatMap((offset) => Object.values(DEFAULT_PORTS).map((p) => p + offset))];
    const published: Record<string, number> = {};
    for (const [name, service] of Object.entries(compose.services)) {
      for (const port of service.ports ?? []) {
        expect(port, `${name} binds 127.0.0.1`).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
        published[`${name}:${port.split(':')[2]}`] = Number(port.split(':')[1]);
      }
    }
    for (const line of raw.match(/^ {6}- '.*:\d+'$/gm) ?? []) {
      expect(line, 'a host port from .env').toMatch(/'127\.0\.0\.1:\$\{\w+_HOST_PORT:-\d+\}:\d+'/);
    }
    const hostPorts = Object.values(published);
    expect(hostPorts.filter((port) => native.includes(port))).toEqual([]);
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
    // The design's container ports are all published: the four APIs, the simulator, SMTP and its UI, PostgreSQL, Redis.
    for (const target of [
      'orders-api:3001',
      'inventory-api:3002',
      'payments-api:3003',
      'notifications-api:3004',
      'stripe-sim:12111',
      'mailpit:1025',
      'mailpit:8025',
      'postgres:5432',
      'redis:6379',
      'jaeger:16686',
      'prometheus:9090',
      'grafana:3000',
      'console:3000',
    ])
      expect(published[target], target).toBeDefined();
  });

  it('builds every idem image locally and never pulls one; each image is built, not named', () => {
    for (const [name, service] of Object.entries(services).filter(([, s]) => s.build)) {
      expect(service.pull_policy, name).toBe('build');
      expect(service.image, name).toBeUndefined();
    }
    for (const [name, service] of Object.entries(services).filter(([, s]) => !s.build)) {
      expect(service.image, name).toMatch(/^[\w./-]+:[\w.-]+$/); // a pinned tag, never latest
      expect(service.image, name).not.toMatch(/:latest$/);
    }
  });

  it("gives every idem process longer to stop than the runtime's own shutdown bound", () => {
    const seconds = (value: string | undefined) => Number(/^(\d+)s$/.exec(value ?? '')?.[1] ?? 10); // Docker's default: 10 s
    expect(idemProcesses.length).toBeGreaterThan(8);
    for (const [name, service] of idemProcesses) {
      expect(seconds(service.stop_grace_period) * 1000, name).toBeGreaterThan(SHUTDOWN_TIMEOUT_MS + 5_000);
    }
  });

  it('connects every service as its runtime role and the migrate job as the owning role, each to its own database, never as the superuser', () => {
    for (const service of Object.keys(SERVICES)) {
      const SERVICE = service.toUpperCase();
      const urls = [
        [environments[service]!.DATABASE_URL!, `${service}_runtime`, `${service}-runtime-db-password`],
        [environments[`${service}-api`]!.DATABASE_URL!, `${service}_runtime`, `${service}-runtime-db-password`],
        [environments.migrate![`${SERVICE}_DATABASE_URL`]!, service, `${service}-db-password`],
      ] as const;
      for (const [url, role, password] of urls) {
        const parsed = new URL(url);
        expect(parsed.username, url).toBe(role);
        expect(parsed.pathname, url).toBe(`/${service}`);
        expect(decodeURIComponent(parsed.password), url).toBe(secrets[password]);
      }
    }
    // The console reads every database as its read-only role.
    for (const service of Object.keys(SERVICES)) {
      const url = new URL(environments.console![`${service.toUpperCase()}_DATABASE_URL`]!);
      expect([url.username, url.pathname, url.password], service).toEqual([
        'console',
        `/${service}`,
        secrets['console-db-password'],
      ]);
    }
    expect(raw).not.toMatch(/postgresql:\/\/(postgres|idem)[:@]/);
    expect(read('infra/postgres/init.sh')).toMatch(/for service in orders inventory payments notifications; do/);
    expect(services.postgres!.volumes).toContain('./infra/postgres/init.sh:/docker-entrypoint-initdb.d/init.sh:ro');
  });

  it('checks PostgreSQL readiness over TCP, not the socket the first-time init server listens on', () => {
    const test = (services.postgres!.healthcheck as { test: string[] }).test;
    expect(test.slice(0, 2)).toEqual(['CMD', 'pg_isready']);
    expect(test[test.indexOf('-h') + 1]).toBe('127.0.0.1');
  });

  it('runs Redis with its users from a file (no password on its command line), append-only persistence, a memory limit and noeviction', () => {
    const command = services.redis!.command!;
    const option = (name: string) => command[command.indexOf(name) + 1];
    expect(option('--aclfile')).toBe(`${SECRETS_DIR}/redis-users.acl`);
    expect(command.join(' ')).not.toContain('password');
    expect(option('--appendonly')).toBe('yes');
    expect(option('--maxmemory')).toBe(example.REDIS_MAXMEMORY);
    expect(option('--maxmemory-policy')).toBe('noeviction');
    // Each service logs in as its own user; the console too, one that reads the journal and nothing else.
    for (const [name] of idemProcesses.filter(([n]) => n !== 'stripe-sim' && n !== 'console')) {
      const service = name.replace(/-api$/, '');
      const url = new URL(environments[name]!.REDIS_URL!);
      expect([url.username, url.password], name).toEqual([`idem-${service}`, secrets[`${service}-redis-password`]]);
    }
    const console_ = new URL(environments.console!.REDIS_URL!);
    expect([console_.username, console_.password]).toEqual(['idem-console', secrets['console-redis-password']]);
    expect(shared.redis!['redis-users.acl']).toMatch(new RegExp(`^user default on >${secrets['redis-password']} `));
    // The script's line for the console is the one @idem/messaging defines.
    const consoleLine = aclFileLine(
      consoleRedisUser('idem-console', { prefix: 'idem' }),
      secrets['console-redis-password']!,
    );
    expect(shared.redis!['redis-users.acl']!.split('\n')).toContain(consoleLine);
    // The script watcher's, which may PING and SCRIPT KILL; no KEDA's (compose runs none), and no
    // password left a placeholder.
    const watcherLine = aclFileLine(
      scriptWatcherRedisUser('idem-script-watcher'),
      secrets['script-watcher-redis-password']!,
    );
    expect(shared.redis!['redis-users.acl']!.split('\n')).toContain(watcherLine);
    expect(shared.redis!['redis-users.acl']).not.toMatch(/idem-keda|\{\{/);
    expect(environments['redis-script-watcher']).toMatchObject({
      REDIS_USER: 'idem-script-watcher',
      REDISCLI_AUTH: secrets['script-watcher-redis-password'],
    });
    expect((services.redis!.healthcheck as { test: string[] }).test.join(' ')).toContain(
      'REDISCLI_AUTH=$(cat /run/idem-secrets/redis-password) redis-cli ping',
    );
  });

  it('leaves Grafana without a default admin password and Prometheus without its lifecycle API', () => {
    // Grafana's own `__FILE` convention, on the generated password.
    expect(services.grafana!.environment!.GF_SECURITY_ADMIN_PASSWORD__FILE).toBe(
      `${SECRETS_DIR}/grafana-admin-password`,
    );
    expect(raw).not.toMatch(/admin\/admin|GRAFANA_ADMIN_PASSWORD:-/);
    expect(services.prometheus!.command!.join(' ')).not.toContain('--web.enable-lifecycle');
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
    for (const [service, { load }] of Object.entries(SERVICES)) {
      for (const name of [service, `${service}-api`]) {
        const environment = services[name]?.environment && environments[name];
        expect(environment, name).toBeDefined();
        // Compose sets a variable written as `VAR:` or `VAR: ''` to the empty string.
        const env = Object.fromEntries(Object.entries(environment!).map(([k, v]) => [k, v == null ? '' : String(v)]));
        expect(() => load(env), name).not.toThrow();
        expect(unknownVariables(service as keyof typeof SERVICES, Object.keys(environment!)), name).toEqual([]);
        expect(Number(env.PORT), name).toBe(SERVICES[service as keyof typeof SERVICES].port);
      }
    }
  });

  it("starts every image it builds with bundles that package has (the image's command, or its own)", () => {
    const built = Object.entries(services).filter(([, s]) => s.build?.target === 'service');
    expect(built.length).toBeGreaterThan(8);
    for (const [name, service] of built) {
      const dir = Object.keys(ENTRYPOINTS).find((d) => `@idem/${d.split('/')[1]}` === service.build!.args!.PACKAGE);
      const bundles = Object.keys(ENTRYPOINTS[dir!] ?? {}).map((entry) => `dist/${entry}.js`);
      for (const file of bundlesStartedBy(service.command ?? SERVICE_IMAGE_COMMAND))
        expect(bundles, name).toContain(file);
    }
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

  it('aggregate queue-wide and database-wide gauges with max, since every replica exports them', () => {
    const gauges = new Set(
      sourceFiles(['packages', 'services']).flatMap((file) =>
        [...readFileSync(file, 'utf8').matchAll(/gauge\(\s*'(idem_[a-z_]+)'/g)].map((m) => m[1]!),
      ),
    );
    expect([...gauges]).toEqual(
      expect.arrayContaining(['idem_queue_jobs', 'idem_outbox_backlog', 'idem_redis_memory_used_bytes']),
    );
    const dashboard = JSON.parse(read('infra/grafana/dashboards/idem.json')) as {
      panels: { targets?: { expr: string }[] }[];
    };
    const alerts = parse(read('infra/prometheus/alerts.yml')) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    const expressions = [
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
      ...alerts.groups.flatMap((g) => g.rules.map((r) => r.expr)),
    ];
    const summedGauges = expressions.flatMap((expr) =>
      aggregations(expr, 'sum')
        .filter((argument) => [...gauges].some((gauge) => argument.includes(gauge)))
        .map((argument) => `sum(${argument}) in ${expr}`),
    );
    expect(summedGauges).toEqual([]);
    expect(aggregations('sum by (a) (x{y="1"}) + max(z)', 'sum')).toEqual(['x{y="1"}']); // the parser itself
    expect(alerts.groups.flatMap((g) => g.rules.map((r) => r.alert))).toContain('IdemRedisMemoryHigh');
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

/** The argument of every `op by (...) (argument)` / `op (argument)` aggregation in a PromQL expression. */
function aggregations(expr: string, op: string): string[] {
  const found: string[] = [];
  for (const match of expr.matchAll(new RegExp(`\\b${op}\\s*(?:(?:by|without)\\s*\\([^)]*\\)\\s*)?\\(`, 'g'))) {
    let depth = 1;
    let i = match.index + match[0].length;
    const start = i;
    for (; i < expr.length && depth > 0; i++) depth += expr[i] === '(' ? 1 : expr[i] === ')' ? -1 : 0;
    found.push(expr.slice(start, i - 1));
  }
  return found;
}

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
