import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { seedDemoShop } from '@idem/console';
import { SERVICE_NAMES, SERVICE_REGISTRY, type ServiceName } from '@idem/shop';
import { DEVELOPMENT_JWT_SECRET, isLoopbackAddress } from '@idem/http';
import { asRole, CONSOLE_ROLES, databaseRolesOf, provisionConsoleRoles, provisionDatabase } from './databases.js';
import { bundleNamedBy, IMAGE_ENV, SERVICE_IMAGE_COMMAND } from './deployed.js';
import { hasLuaSandboxFixes, provisionRedisUsers, watchRunawayScripts } from './redis-users.js';
import { consoleCustomerToken, customerTokensOf, operatorTokenVariable } from './tokens.js';

/** What every key the Stripe simulator accepts begins with (payments' configuration knows it so). */
const SIMULATOR_KEY_PREFIX = 'sk_test_idem_simulator';

/**
 * The whole system as native processes: every service's database migrated by its own
 * migrate entrypoint, then the four services, the Stripe simulator and the SMTP sink, each
 * started from the same entrypoint its container uses.
 */

const root = fileURLToPath(new URL('../../../', import.meta.url));
const INSTRUMENTATION = './packages/observability/src/instrumentation.ts';

/** The image's command for a service started from its sources: its bundles replaced by their sources, `entry` for main.js. */
const fromSources = (entry: string) =>
  SERVICE_IMAGE_COMMAND.slice(1).map((arg) => {
    const bundle = bundleNamedBy(arg);
    return bundle === 'dist/main.js' ? entry : bundle === 'dist/instrumentation.js' ? INSTRUMENTATION : arg;
  });

export const SERVICES = SERVICE_NAMES;
export type { ServiceName };

export interface SystemOptions {
  /** PostgreSQL server (no database). @defaultValue POSTGRES_URL or postgresql://postgres@127.0.0.1:5432 */
  readonly postgresUrl?: string;
  /** @defaultValue REDIS_URL or redis://127.0.0.1:6379 */
  readonly redisUrl?: string;
  /** Added to every default port, so a second system can run beside the first. @defaultValue 0 */
  readonly portOffset?: number;
  /** Suffix for database names and the queue prefix (isolation for tests). @defaultValue none */
  readonly name?: string;
  /** Extra environment for every service process (fault switches, roles, ...). */
  readonly env?: Record<string, string>;
  /** Instances of each service: the first serves HTTP too, the others consume, relay and work. @defaultValue 1 */
  readonly replicas?: number;
  /** Extra environment per service (or simulator: a proxy in front of it is a host it must answer to). */
  readonly serviceEnv?: Partial<Record<ServiceName | 'stripe-sim' | 'smtp-sink', Record<string, string>>>;
  /** Where each log line goes; receives the process name and a readable line. @defaultValue stdout, prefixed and coloured */
  readonly log?: (process: string, line: string) => void;
  /**
   * Start a part again when it dies (SIGKILLed by a fault switch, say), as compose's restart
   * policy does, with a log line. Tests that restart parts themselves leave it off. @defaultValue false
   */
  readonly restartOnExit?: boolean;
  /** Run the teaching console too (on 3000 + offset). @defaultValue false */
  readonly console?: boolean;
  /**
   * Node.js options for every process: `--cpu-prof` (which NODE_OPTIONS refuses), `--import` of a
   * .ts file. From the sources they come after tsx is loaded; for a deployed service, before its
   * image's command, whose own flags then win. @defaultValue none
   */
  readonly nodeOptions?: readonly string[];
  /**
   * Start the services as their images do, from these deploys (deployed.ts, `deployServices`):
   * the image's command and environment, no tsx. Migrations, simulators and the console still
   * run from the sources. @defaultValue every service from its sources, through tsx
   */
  readonly deployed?: Readonly<Record<ServiceName, string>>;
  /**
   * The address every process binds: this machine only unless told otherwise (0.0.0.0 serves
   * the network, and then needs a JWT_SECRET of its own). @defaultValue IDEM_BIND_ADDRESS or 127.0.0.1
   */
  readonly bindAddress?: string;
  /**
   * Put the demo shop's catalogue and stock in once the system is up (demo-data.ts), through the
   * operator API, where a SKU has none yet: a development system asks for it; no service seeds
   * anything on its own. @defaultValue true
   */
  readonly demoData?: boolean;
}

export interface RunningSystem {
  readonly urls: Record<ServiceName | 'stripe' | 'smtp' | 'mail' | 'console', string>;
  /**
   * The operator token of the console and the doubles (their login and API beyond loopback, the
   * mail sink's API): ADMIN_TOKEN, or one made for the system. It opens no service.
   */
  readonly adminToken: string;
  /** Each API's operator token, which opens that service's operator endpoints only: <SERVICE>_ADMIN_TOKEN, or one made for the system. */
  readonly adminTokens: Record<ServiceName, string>;
  /** Each service's fault switches token (its processes' FAULTS_TOKEN): <SERVICE>_FAULTS_TOKEN, or one made for the system. */
  readonly faultsTokens: Record<ServiceName, string>;
  /**
   * Each service's database as the server's superuser reaches it (for tools and tests: the
   * checker, a test that plants a row). The services themselves connect as their runtime role,
   * and migrate as the role that owns the database; the console reads as its read-only role
   * (databases.ts).
   */
  readonly databaseUrls: Record<ServiceName, string>;
  readonly queuePrefix: string;
  /** The running process of each part, e.g. to SIGKILL one. */
  readonly processes: Map<string, ChildProcess>;
  /** Starts a part again (after it was killed), with the same configuration. */
  restart(part: string, extraEnv?: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Short locks, leases and timeouts, so a killed or paused process's work is taken over in
 * seconds (the e2e tests and the chaos run). Each lease still outlasts what it covers: the
 * dispatcher's one send (3 × 400 ms of SMTP waits), the payment worker's two Stripe requests.
 * The simulator's search is up to date at once, so a payment whose answer was lost is looked up
 * after 2 s.
 */
export const QUICK_TAKEOVER_ENV = {
  CONSUMER_LOCK_MS: '5000',
  CONSUMER_STALLED_INTERVAL_MS: '1000',
  PAYMENT_WORKER_LEASE_MS: '3000',
  STRIPE_TIMEOUT_MS: '1000',
  DISPATCHER_LEASE_MS: '6000',
  SMTP_TIMEOUT_MS: '400',
  PROVIDER_SEARCH_LAG_MS: '2000',
  DATABASE_POOL_MAX: '4',
} as const;

/**
 * Rate limits out of the way, for runs that place orders as fast as they can as one customer
 * from one address (the bench, the chaos run, the e2e tests).
 */
export const UNLIMITED_ORDERS_ENV = {
  RATE_LIMIT_ORDERS_PER_CUSTOMER: '1000000',
  RATE_LIMIT_ORDERS_PER_ADDRESS: '1000000',
  RATE_LIMIT_CANCELS_PER_CUSTOMER: '1000000',
} as const;

/** The native run's ports (each plus `portOffset`). */
export const DEFAULT_PORTS = {
  ...(Object.fromEntries(SERVICES.map((service) => [service, SERVICE_REGISTRY[service].port])) as Record<
    ServiceName,
    number
  >),
  stripe: 12111,
  smtp: 1025,
  mail: 8025,
  console: 3000,
} as const;

const COLORS = [36, 33, 35, 32, 34, 31, 90];

/**
 * Where a system's parts are: its ports (the defaults plus `portOffset`), and — for a named
 * system — databases and a queue prefix of its own (`orders_<name>`, `idem_<name>`), so two
 * systems on one machine never share a database or a queue.
 */
export function describeSystem({
  postgresUrl = 'postgresql://postgres@127.0.0.1:5432',
  portOffset = 0,
  name,
}: {
  postgresUrl?: string;
  portOffset?: number | undefined;
  name?: string | undefined;
}) {
  const suffix = name ? `_${name}` : '';
  const port = Object.fromEntries(
    Object.entries(DEFAULT_PORTS).map(([part, value]) => [part, value + portOffset]),
  ) as Record<keyof typeof DEFAULT_PORTS, number>;
  const http = (part: keyof typeof DEFAULT_PORTS) => `http://127.0.0.1:${port[part]}`;
  const databaseUrls = Object.fromEntries(
    SERVICES.map((s) => [s, `${postgresUrl.replace(/\/$/, '')}/${s}${suffix}`]),
  ) as Record<ServiceName, string>;
  return {
    port,
    queuePrefix: `idem${suffix}`,
    databaseUrls,
    /**
     * The console's way in, as in compose: each service's database as its read-only role, and the
     * server, for its lessons' and explorer's databases, as the role that may create only those.
     */
    console: {
      databaseUrls: Object.fromEntries(
        SERVICES.map((s) => [s, asRole(databaseUrls[s], CONSOLE_ROLES.reader)]),
      ) as Record<ServiceName, string>,
      scratchServerUrl: asRole(postgresUrl, CONSOLE_ROLES.scratch).replace(/\/$/, ''),
    },
    urls: {
      ...(Object.fromEntries(SERVICES.map((service) => [service, http(service)])) as Record<ServiceName, string>),
      stripe: http('stripe'),
      smtp: `smtp://127.0.0.1:${port.smtp}`,
      mail: http('mail'),
      console: http('console'),
    },
  };
}

/**
 * The system `pnpm start`, `pnpm demo` and `pnpm check` mean: IDEM_PORT_OFFSET moves every port,
 * and a system with an offset (or an IDEM_SYSTEM name) also gets databases and a queue prefix of
 * its own — "a second system beside the first" really is a second system.
 */
export function systemFromEnv(env: NodeJS.ProcessEnv = process.env) {
  const portOffset = Number(env.IDEM_PORT_OFFSET ?? 0);
  const name = env.IDEM_SYSTEM || (portOffset ? `port${portOffset}` : undefined);
  const postgresUrl = env.POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432';
  const replicas = Number(env.IDEM_REPLICAS ?? 1);
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 8)
    throw new Error(`IDEM_REPLICAS=${env.IDEM_REPLICAS}: give a whole number of instances per service, 1 to 8`);
  return { portOffset, name, postgresUrl, replicas, ...describeSystem({ postgresUrl, portOffset, name }) };
}

export async function startSystem(options: SystemOptions = {}): Promise<RunningSystem> {
  const postgresUrl = (
    options.postgresUrl ??
    process.env.POSTGRES_URL ??
    'postgresql://postgres@127.0.0.1:5432'
  ).replace(/\/$/, '');
  const redisUrl = options.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const {
    port,
    urls,
    databaseUrls,
    queuePrefix,
    console: consoleDatabases,
  } = describeSystem({
    postgresUrl,
    portOffset: options.portOffset,
    name: options.name,
  });
  const log = options.log ?? colouredStdout();
  const env = { ...process.env, ...options.env };
  // Customer tokens are checked by orders, minted here for the console and by any client (tokens.ts).
  const jwtSecret = customerTokensOf(env).secret;
  const bindAddress = options.bindAddress ?? env.IDEM_BIND_ADDRESS ?? '127.0.0.1';
  // Every system has an operator: ADMIN_TOKEN for the console and the doubles, and for each API a
  // token of its own, which opens no other (the demo data goes in through orders' and inventory's).
  const adminToken = env.ADMIN_TOKEN || randomBytes(24).toString('base64url');
  const adminTokens = Object.fromEntries(
    SERVICES.map((s) => [s, env[operatorTokenVariable(s)] || randomBytes(24).toString('base64url')]),
  ) as Record<ServiceName, string>;
  const refusal = bindRefusal(bindAddress, jwtSecret, env.ADMIN_TOKEN);
  if (refusal) throw new Error(refusal);
  // Every process binds it: the services, the simulators, the console.
  const everywhere = { HOST: bindAddress };
  // Serving a network, the simulator admits a key of its own, never its public placeholder.
  const stripeKey: Record<string, string> = isLoopbackAddress(bindAddress)
    ? {}
    : { STRIPE_API_KEY: `${SIMULATOR_KEY_PREFIX}_${randomBytes(16).toString('hex')}` };
  const operator = { ADMIN_TOKEN: adminToken };
  // Each service's processes open their fault switches to a token of their own, which the console
  // holds; the console never sends the operator token to a process's switches.
  const faultsTokens = Object.fromEntries(
    SERVICES.map((s) => [s, env[`${s.toUpperCase()}_FAULTS_TOKEN`] || randomBytes(24).toString('base64url')]),
  ) as Record<ServiceName, string>;

  const parts: Record<
    string,
    { entry: string; service?: true; deployed?: string; env: Record<string, string>; health: string }
  > = {
    'stripe-sim': {
      entry: 'infra/stripe-sim/src/main.ts',
      env: {
        ...everywhere,
        STRIPE_SIM_PORT: String(port.stripe),
        ...(stripeKey.STRIPE_API_KEY ? { STRIPE_SIM_API_KEY: stripeKey.STRIPE_API_KEY } : {}),
        ...options.serviceEnv?.['stripe-sim'],
      },
      health: `${urls.stripe}/health`,
    },
    'smtp-sink': {
      entry: 'infra/smtp-sink/src/main.ts',
      env: {
        ...everywhere,
        SMTP_SINK_PORT: String(port.smtp),
        SMTP_SINK_HTTP_PORT: String(port.mail),
        ...operator,
        ...options.serviceEnv?.['smtp-sink'],
      },
      health: `${urls.mail}/health`,
    },
    ...Object.fromEntries(
      SERVICES.map((service) => [
        service,
        {
          entry: `services/${service}/src/main.ts`,
          service: true,
          deployed: options.deployed?.[service],
          env: {
            ...everywhere,
            OTEL_SERVICE_NAME: service,
            // A development system: the console follows every delivery in the journal.
            DELIVERY_JOURNAL: 'true',
            DATABASE_URL: asRole(databaseUrls[service], databaseRolesOf(service).runtime),
            REDIS_URL: redisUrl,
            PORT: String(port[service]),
            IDEM_QUEUE_PREFIX: queuePrefix,
            STRIPE_API_BASE: urls.stripe,
            SMTP_URL: urls.smtp,
            // The sink's message search: a reply lost after a message went is looked up, not sent again.
            // Beyond loopback the sink answers only to the operator token, which a provider's client is
            // not given: there such an email is sent again, as to any server that cannot be searched.
            ...(service === 'notifications' && isLoopbackAddress(bindAddress) ? { SMTP_LOOKUP_URL: urls.mail } : {}),
            ...(service === 'orders' ? { JWT_SECRET: jwtSecret } : {}),
            ...(service === 'payments' ? stripeKey : {}),
            FAULTS_TOKEN: faultsTokens[service],
            ...options.env,
            // After the shared environment: an ADMIN_TOKEN given to every process opens no service.
            ADMIN_TOKEN: adminTokens[service],
            ...options.serviceEnv?.[service],
          },
          health: `${urls[service]}/health`,
        },
      ]),
    ),
  };
  if (options.console) {
    parts.console = {
      entry: 'infra/console/src/main.ts',
      env: {
        ...everywhere,
        PORT: String(port.console),
        // Never the superuser: it reads as `console` and makes its scratch databases as `lessons`.
        POSTGRES_URL: asRole(postgresUrl, CONSOLE_ROLES.reader).replace(/\/$/, ''),
        ...Object.fromEntries(
          SERVICES.map((s) => [`${s.toUpperCase()}_DATABASE_URL`, consoleDatabases.databaseUrls[s]]),
        ),
        REDIS_URL: redisUrl,
        IDEM_QUEUE_PREFIX: queuePrefix,
        ORDERS_API: urls.orders,
        MAIL_API: urls.mail,
        STRIPE_API_BASE: urls.stripe,
        ...stripeKey,
        CONSOLE_PROCESSES: SERVICES.map((s) => `${s}=${urls[s]}`).join(','),
        // The lessons make databases and queues of their own on the same servers.
        CONSOLE_LESSONS: '1',
        // So does the explorer's cancel-versus-reservation space (from the sources).
        CONSOLE_EXPLORER: '1',
        TEST_POSTGRES_URL: consoleDatabases.scratchServerUrl,
        ...operator,
        ...Object.fromEntries(SERVICES.map((s) => [`${s.toUpperCase()}_FAULTS_TOKEN`, faultsTokens[s]])),
        // The services' broker lock: a delivery whose journal entry has not arrived by then died.
        ...(env.CONSUMER_LOCK_MS ? { CONSUMER_LOCK_MS: env.CONSUMER_LOCK_MS } : {}),
        // Its customer's token, not the key that signs them: it can act as no other customer.
        CUSTOMER_TOKEN: await consoleCustomerToken(env),
      },
      health: `${urls.console}/health`,
    };
  }
  // Each service reaches Redis as a user of its own, allowed only its queues (as in compose).
  const redisUsers = await provisionRedisUsers(redisUrl, queuePrefix, SERVICES);
  if (!hasLuaSandboxFixes(redisUsers.version))
    log(
      'redis',
      `Redis ${redisUsers.version} lacks the Lua sandbox fixes of 7.2.11 / 7.4.6 / 8.0.4 / 8.2.2: its users keep the ` +
        'services apart only as far as those scripts do. Compose and Kubernetes run 7.4.6; use a fixed Redis beyond a dev machine.',
    );
  // The system's one watch for a script that never ends: this process, as a user that may only PING and SCRIPT KILL.
  const stopWatching = watchRunawayScripts(redisUsers.as('script-watcher', redisUrl), (line) => log('redis', line));
  const releaseRedis = async () => {
    stopWatching();
    await redisUsers.remove();
  };
  for (const service of SERVICES) {
    const part = parts[service]!;
    part.env = { ...part.env, REDIS_URL: redisUsers.as(service, part.env.REDIS_URL ?? redisUrl) };
  }
  // The console reads the journal and runs its lessons' queues, as a user allowed nothing else.
  if (parts.console) parts.console.env = { ...parts.console.env, REDIS_URL: redisUsers.as('console', redisUrl) };
  // Extra instances of each service (`orders-2`, ...) run consumers, relay and workers beside
  // the first one, competing for the same queues and outbox rows; each listens on its own port.
  for (let replica = 2; replica <= (options.replicas ?? 1); replica++) {
    for (const service of SERVICES) {
      const replicaPort = port[service] + 100 * (replica - 1);
      // No operator token: a process without the `http` role serves no operator route.
      const { ADMIN_TOKEN: _operator, ...worker } = parts[service]!.env;
      parts[`${service}-${replica}`] = {
        ...parts[service]!,
        env: { ...worker, PORT: String(replicaPort), IDEM_ROLES: 'consumers,relay,workers' },
        health: `http://127.0.0.1:${replicaPort}/health`,
      };
    }
  }

  const processes = new Map<string, ChildProcess>();
  const launch = (
    name: string,
    { entry, service, deployed }: { entry: string; service?: true; deployed?: string },
    env: Record<string, string>,
  ): ChildProcess => {
    const nodeOptions = options.nodeOptions ?? [];
    // A service starts with its image's command: from its deploy as it is, with the image's
    // environment; from its sources through tsx, with the sources in place of the bundles.
    const { args, cwd, image } = deployed
      ? { args: [...nodeOptions, ...SERVICE_IMAGE_COMMAND.slice(1)], cwd: deployed, image: IMAGE_ENV }
      : {
          args: [
            '--conditions=development',
            '--import',
            'tsx',
            ...nodeOptions,
            ...(service ? fromSources(entry) : [entry]),
          ],
          cwd: root,
          image: {},
        };
    const child = spawn(process.execPath, args, {
      cwd,
      env: { ...withoutOperatorTokens({ ...process.env, ...env }), ...image },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => log(name, readable(line)));
    }
    return child;
  };

  // Migrations first, through each service's own migrate entrypoint (the compose `migrate` job
  // runs the same), as the role that owns the database; it grants the runtime role its rights.
  const migrated = Promise.all(
    SERVICES.map(async (service) => {
      await provisionDatabase(databaseUrls[service], service);
      const { owner, runtime } = databaseRolesOf(service);
      const child = launch(
        `${service}-migrate`,
        { entry: `services/${service}/src/migrate.ts` },
        {
          DATABASE_URL: asRole(databaseUrls[service], owner),
          DATABASE_RUNTIME_ROLE: runtime,
        },
      );
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      if (code !== 0) throw new Error(`migrating the ${service} database failed (exit ${code})`);
    }),
  );
  await migrated
    // The console's roles once the databases are there: it may connect to each.
    .then(async () => {
      if (options.console) await provisionConsoleRoles(postgresUrl, Object.values(databaseUrls));
    })
    .catch(async (error: unknown) => {
      await releaseRedis();
      throw error;
    });

  let stopping = false;
  const start = async (name: string, extraEnv: Record<string, string> = {}) => {
    const part = parts[name];
    if (!part) throw new Error(`no part named ${name}; parts: ${Object.keys(parts).join(', ')}`);
    const child = launch(name, part, { ...part.env, ...extraEnv });
    processes.set(name, child);
    if (options.restartOnExit) {
      child.once('exit', (code, signal) => {
        if (stopping || processes.get(name) !== child) return;
        log(name, `exited (${signal ?? code}); restarting it, as compose's restart policy would`);
        start(name).catch((error: unknown) => log(name, `could not be restarted: ${(error as Error).message}`));
      });
    }
    await waitForHealth(part.health, child, name);
  };
  try {
    await Promise.all(['stripe-sim', 'smtp-sink'].map((name) => start(name)));
    await Promise.all(
      Object.keys(parts)
        .filter((name) => !['stripe-sim', 'smtp-sink'].includes(name))
        .map((name) => start(name)),
    );
    if (options.demoData !== false) await seedDemoShop({ orders: urls.orders, inventory: urls.inventory, adminTokens });
  } catch (error) {
    stopping = true;
    await stopAll(processes);
    await releaseRedis();
    throw error;
  }

  return {
    urls,
    adminToken,
    adminTokens,
    faultsTokens,
    databaseUrls,
    queuePrefix,
    processes,
    restart: start,
    stop: async () => {
      stopping = true;
      await stopAll(processes);
      await releaseRedis();
    },
  };
}

/**
 * Why the system must not start as asked, if it must not: bound beyond this machine with the
 * public development key, anyone on the network could sign customer tokens; without an operator
 * token, the console and the doubles (which then serve only the operator) could serve nobody.
 */
export function bindRefusal(bindAddress: string, jwtSecret: string, adminToken?: string): string | undefined {
  if (isLoopbackAddress(bindAddress)) return undefined;
  if (jwtSecret === DEVELOPMENT_JWT_SECRET)
    return (
      `IDEM_BIND_ADDRESS=${bindAddress} serves the network, and customer tokens would be checked against the ` +
      'public development key (anyone could sign one): set a JWT_SECRET of your own (32 characters or more) as well'
    );
  if (!adminToken)
    return (
      `IDEM_BIND_ADDRESS=${bindAddress} serves the network, where the console, the Stripe simulator and the mail ` +
      'sink serve only the operator: set ADMIN_TOKEN as well'
    );
  return undefined;
}

async function waitForHealth(url: string, child: ChildProcess, name: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited (${child.signalCode ?? child.exitCode}) before it was healthy`);
    }
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${name} was not healthy at ${url} within ${timeoutMs} ms`);
}

async function stopAll(processes: Map<string, ChildProcess>): Promise<void> {
  await Promise.all(
    [...processes.values()].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

function colouredStdout(): (name: string, line: string) => void {
  const colours = new Map<string, number>();
  return (name, line) => {
    if (!colours.has(name)) colours.set(name, COLORS[colours.size % COLORS.length]!);
    process.stdout.write(`\u001b[${colours.get(name)}m${name.padEnd(13)}\u001b[0m| ${line}\n`);
  };
}

/** A pino JSON line as `level message key=value ...`; anything else as it is. */
function readable(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const {
      level,
      time: _time,
      pid: _pid,
      hostname: _host,
      service: _service,
      name: _name,
      msg,
      ...fields
    } = JSON.parse(line) as Record<string, unknown>;
    const levels: Record<number, string> = {
      10: 'trace',
      20: 'debug',
      30: 'info',
      40: 'warn',
      50: 'error',
      60: 'fatal',
    };
    const rest = Object.entries(fields)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
      .join(' ');
    return [levels[level as number] ?? level, msg, rest].filter((part) => part !== undefined && part !== '').join(' ');
  } catch {
    return line;
  }
}

/**
 * What a process inherits, without the operator tokens meant for others: each API's own comes as
 * its ADMIN_TOKEN, so no process holds another's (`<SERVICE>_ADMIN_TOKEN`), and no `ADMIN_TOKENS`
 * of the shell opens all four APIs with one token.
 */
function withoutOperatorTokens(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !/^(ADMIN_TOKENS|[A-Z]+_ADMIN_TOKEN)$/.test(name)));
}
