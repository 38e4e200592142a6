/**
 * Writes deploy/kubernetes/base from what the code already says — the services and their ports
 * (the service registry, @idem/shop), who consumes what (the shop's catalogue, @idem/shop), the
 * Redis users (@idem/messaging), BullMQ's own key names, the runtime's shutdown bound, the alert
 * rules — so the manifests cannot drift from it:
 * manifests.int.spec.ts regenerates the base and compares. Run `pnpm k8s:generate` after
 * changing any of those. So is components/redis-cluster, which puts the queues on a Redis Cluster
 * (its KEDA list keys follow from the queue names). The overlays are written by hand.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serviceOf } from '@idem/contracts';
import { consumers, reachOf, SERVICE_NAMES, SERVICE_REGISTRY, type ConsumerName, type ServiceName } from '@idem/shop';
import { aclFileTemplate, kedaRedisUser, queueName, redisUserOf, scriptWatcherRedisUser } from '@idem/messaging';
import { SHUTDOWN_TIMEOUT_MS } from '@idem/runtime';
import { QueueKeys } from 'bullmq';
import { parse, stringify } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '../..');

/** The BullMQ prefix the base configures (IDEM_QUEUE_PREFIX): the KEDA list keys follow from it. */
export const QUEUE_PREFIX = 'idem';

/**
 * CPU per order of each service's processes at 20 orders/s, all roles in one process (the
 * capacity model in docs/scaling.md: run 2026-12-01T22-59-00-108Z). A pod is sized for
 * DESIGN_ORDERS_PER_SECOND; a service not measured yet (a new one) is sized as the most expensive
 * one until it is.
 */
export const CPU_MS_PER_ORDER: Partial<Record<ServiceName, number>> = {
  orders: 15.5,
  inventory: 11.8,
  payments: 11.8,
  notifications: 12.9,
};
const DESIGN_ORDERS_PER_SECOND = 20;
/** Deliveries waiting per worker replica before KEDA adds one. */
const WAITING_PER_REPLICA = 100;
/** How long the API keeps serving after it is taken out of the Service's endpoints. */
const PRE_STOP_SECONDS = 5;

/** A variable set from a Secret, referenced by name (never inlined in the base). */
export interface SecretVariable {
  readonly variable: string;
  readonly secret: string;
  readonly key: string;
  /** The service runs without it (no ADMIN_TOKEN: operator endpoints disabled). */
  readonly optional?: true;
}

/**
 * The proxies whose X-Forwarded-For the services believe (TRUST_PROXY, in idem-config): the
 * ingress controller's pods. The base names the pod network of kind and kubeadm with flannel
 * (the dev overlay's clusters); a cluster's operator sets their own — the controller's range,
 * else the pod CIDR (docs/operations.md "Behind a proxy": what goes wrong when it is wrong).
 */
export const INGRESS_ADDRESS_RANGE = '10.244.0.0/16';

/** The namespace the base names where a name must be qualified; each overlay replaces it with its own. */
export const BASE_NAMESPACE = 'idem';

/**
 * The role a service's migrations run as (it owns the database) and the role the service runs
 * as (data, never schema: the migrator grants it), the same names as compose and the native run.
 */
export const databaseRolesOf = (service: ServiceName) => ({ owner: service, runtime: `${service}_runtime` });

/** The Secret the migrate init container reads: the database as the role that owns it. */
export const migratorSecretOf = (service: ServiceName) => `${service}-database-owner`;

/**
 * The Secrets each service's pods read; deploy/kubernetes/README.md lists them for production.
 * Only the API's pods get the keys that admit callers (its own operator token, the customer-token
 * key): a worker serves no caller and holds no key it never uses.
 */
export function secretVariablesOf(service: ServiceName, component: 'api' | 'worker' = 'api'): SecretVariable[] {
  const api = component === 'api';
  return [
    // As its runtime role, which the migrate init container grants its rights.
    { variable: 'DATABASE_URL', secret: `${service}-database`, key: 'url' },
    // As its own Redis user, which reaches only its queues (redis-users.acl).
    { variable: 'REDIS_URL', secret: `${service}-redis`, key: 'url' },
    // Its own operator token: it opens this API's operator endpoints and no other service's.
    ...(api ? [{ variable: 'ADMIN_TOKEN', secret: `${service}-admin`, key: 'token', optional: true as const }] : []),
    ...(api && service === 'orders' ? [{ variable: 'JWT_SECRET', secret: 'idem-jwt', key: 'secret' }] : []),
    ...(service === 'payments' ? [{ variable: 'STRIPE_API_KEY', secret: 'idem-stripe', key: 'api-key' }] : []),
    ...(service === 'notifications' ? [{ variable: 'SMTP_URL', secret: 'idem-smtp', key: 'url' }] : []),
  ];
}

/** What a service's ConfigMap sets beyond the shared idem-config. */
const SERVICE_SETTINGS: Partial<Record<ServiceName, Record<string, string>>> = {
  orders: {},
  inventory: {},
  // Real Stripe unless an overlay says otherwise (dev: the simulator).
  payments: { PAYMENT_PROVIDER: 'stripe' },
  notifications: { EMAIL_FROM: 'idem shop <shop@idem.local>' },
};

const labelsOf = (service: string, component?: string) => ({
  'app.kubernetes.io/name': service,
  'app.kubernetes.io/part-of': 'idem',
  ...(component ? { 'app.kubernetes.io/component': component } : {}),
});

/**
 * The label of the pods that serve Redis to the services: the base's one Redis, or the nodes of
 * a Redis Cluster (components/redis-cluster), which its operator or chart must give them. The
 * services' egress and the cluster's seed Service select by it.
 */
export const REDIS_POD_LABEL = { 'idem.dev/redis': 'true' };

/** The one Redis of the base, and the Service in front of a Redis Cluster's nodes; each overlay names its namespace. */
const REDIS_ADDRESS = `redis.${BASE_NAMESPACE}.svc.cluster.local:6379`;
const REDIS_CLUSTER_ADDRESS = `redis-cluster.${BASE_NAMESPACE}.svc.cluster.local:6379`;

/**
 * The BullMQ wait lists of a service's consumers: what KEDA reads with LLEN. On a cluster the
 * queue's name is its hash tag (`<prefix>:{<consumer>}:wait`), as the services name it.
 */
function waitListsOf(service: ServiceName, { cluster = false } = {}): { consumer: ConsumerName; key: string }[] {
  const keys = new QueueKeys(QUEUE_PREFIX);
  const redisUrl = cluster ? `redis+cluster://${REDIS_CLUSTER_ADDRESS}` : `redis://${REDIS_ADDRESS}`;
  return (Object.keys(consumers) as ConsumerName[])
    .filter((consumer) => serviceOf(consumer) === service)
    .map((consumer) => ({ consumer, key: keys.toKey(queueName(consumer, redisUrl), 'wait') }));
}

/**
 * KEDA's triggers for a worker: one per consumer, on its wait list. KEDA's operator resolves an
 * address from its own namespace, not this one: the address names the namespace, and each
 * overlay rewrites it to its own (replacements). A cluster is read by KEDA's `redis-cluster`
 * scaler, through any node (`addresses`).
 */
function scalerTriggersOf(service: ServiceName, { cluster = false } = {}): object[] {
  return waitListsOf(service, { cluster }).map(({ consumer, key }) => ({
    type: cluster ? 'redis-cluster' : 'redis',
    name: consumer.replaceAll('.', '-'),
    metadata: {
      ...(cluster ? { addresses: REDIS_CLUSTER_ADDRESS } : { address: REDIS_ADDRESS }),
      listName: key,
      listLength: String(WAITING_PER_REPLICA),
    },
    authenticationRef: { name: 'idem-redis' },
  }));
}

/** KEDA's Redis user, which reads the length of the wait lists and nothing else, and the Secret KEDA logs in with. */
export const KEDA_REDIS_USER = 'idem-keda';
export const KEDA_REDIS_SECRET = 'idem-redis-keda';
/** The user of the container beside Redis that kills a script that never ends (infra/redis-script-watcher.sh), and its Secret. */
export const SCRIPT_WATCHER_REDIS_USER = 'idem-script-watcher';
export const SCRIPT_WATCHER_REDIS_SECRET = 'idem-redis-script-watcher';

/**
 * The pods of KEDA's operator, which runs the scalers (its metrics server asks the operator): the
 * label both its Helm chart and its release manifests give them, in the `keda` namespace.
 */
export const KEDA_OPERATOR_PODS = {
  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'keda' } },
  podSelector: { matchLabels: { app: 'keda-operator' } },
};

/** A pod's security context: that non-root user, and the runtime's seccomp profile. */
const runningAs = (uid: number) => ({
  runAsNonRoot: true,
  runAsUser: uid,
  runAsGroup: uid,
  fsGroup: uid,
  seccompProfile: { type: 'RuntimeDefault' },
});

const restricted = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

function serviceObjects(service: ServiceName): object[] {
  const port = SERVICE_REGISTRY[service].port;
  const cpu = Math.ceil(
    (CPU_MS_PER_ORDER[service] ?? Math.max(...Object.values(CPU_MS_PER_ORDER))) * DESIGN_ORDERS_PER_SECOND,
  );
  const secretEnv = (component: 'api' | 'worker') =>
    secretVariablesOf(service, component).map(({ variable, secret, key, optional }) => ({
      name: variable,
      valueFrom: { secretKeyRef: { name: secret, key, ...(optional ? { optional } : {}) } },
    }));
  const deployment = (component: 'api' | 'worker') => {
    const api = component === 'api';
    return {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: `${service}-${component}`, labels: labelsOf(service, component) },
      spec: {
        // The API scales on CPU (HorizontalPodAutoscaler), the workers on queue depth (KEDA).
        replicas: api ? 2 : 1,
        selector: { matchLabels: labelsOf(service, component) },
        template: {
          metadata: {
            labels: labelsOf(service, component),
            annotations: {
              'prometheus.io/scrape': 'true',
              'prometheus.io/port': String(port),
              'prometheus.io/path': '/metrics',
            },
          },
          spec: {
            // SIGTERM → the runtime stops taking work and settles or abandons what is in flight
            // within SHUTDOWN_TIMEOUT_MS; the API first drains for PRE_STOP_SECONDS.
            terminationGracePeriodSeconds: Math.ceil(SHUTDOWN_TIMEOUT_MS / 1000) + (api ? PRE_STOP_SECONDS : 0) + 5,
            automountServiceAccountToken: false,
            securityContext: runningAs(1000), // the image's `node` user
            // Every new version migrates before it starts: the migrator takes an advisory lock,
            // so replicas starting together apply each migration once.
            initContainers: [
              {
                name: 'migrate',
                image: 'idem/migrate', // each overlay names its registry and tag (`images:`)
                imagePullPolicy: 'IfNotPresent',
                command: ['node', `services/${service}/dist/migrate.js`],
                // As the role that owns the database; it grants the runtime role its rights.
                env: [
                  {
                    name: 'DATABASE_URL',
                    valueFrom: { secretKeyRef: { name: migratorSecretOf(service), key: 'url' } },
                  },
                  { name: 'DATABASE_RUNTIME_ROLE', value: databaseRolesOf(service).runtime },
                ],
                securityContext: restricted,
                resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '256Mi' } },
              },
            ],
            containers: [
              {
                name: service,
                image: `idem/${service}`, // infra/Dockerfile, target `service`, PACKAGE=@idem/<service>
                imagePullPolicy: 'IfNotPresent', // tagged releases: a tag names one image
                ports: [{ name: 'http', containerPort: port }],
                envFrom: [{ configMapRef: { name: 'idem-config' } }, { configMapRef: { name: `${service}-config` } }],
                env: [{ name: 'IDEM_ROLES', value: api ? 'http' : 'consumers,relay,workers' }, ...secretEnv(component)],
                readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 5, timeoutSeconds: 3 },
                // Liveness never looks at a dependency: a restart cannot bring a database back.
                livenessProbe: {
                  httpGet: { path: '/health/live', port: 'http' },
                  periodSeconds: 10,
                  timeoutSeconds: 3,
                  failureThreshold: 3,
                },
                startupProbe: {
                  httpGet: { path: '/health/live', port: 'http' },
                  periodSeconds: 2,
                  failureThreshold: 30,
                },
                ...(api ? { lifecycle: { preStop: { exec: { command: ['sleep', String(PRE_STOP_SECONDS)] } } } } : {}),
                resources: {
                  requests: { cpu: `${api && service !== 'orders' ? 100 : cpu}m`, memory: '192Mi' },
                  limits: { cpu: '1', memory: '512Mi' },
                },
                securityContext: restricted,
                volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
              },
            ],
            volumes: [{ name: 'tmp', emptyDir: {} }],
          },
        },
      },
    };
  };
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: `${service}-config`, labels: labelsOf(service) },
      data: { PORT: String(port), OTEL_SERVICE_NAME: service, ...SERVICE_SETTINGS[service] },
    },
    deployment('api'),
    deployment('worker'),
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: service, labels: labelsOf(service, 'api') },
      spec: {
        selector: labelsOf(service, 'api'),
        ports: [{ name: 'http', port, targetPort: 'http' }],
      },
    },
    {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name: `${service}-api`, labels: labelsOf(service, 'api') },
      spec: {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: `${service}-api` },
        minReplicas: 2,
        maxReplicas: 10,
        metrics: [
          { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } },
        ],
      },
    },
    {
      apiVersion: 'keda.sh/v1alpha1',
      kind: 'ScaledObject',
      metadata: { name: `${service}-worker`, labels: labelsOf(service, 'worker') },
      spec: {
        scaleTargetRef: { name: `${service}-worker` },
        // Never zero: the worker pod also runs the outbox relay and the service's workers.
        minReplicaCount: 1,
        maxReplicaCount: 10,
        pollingInterval: 15,
        cooldownPeriod: 300,
        triggers: scalerTriggersOf(service),
      },
    },
    ...(['api', 'worker'] as const).map((component) => ({
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: `${service}-${component}`, labels: labelsOf(service, component) },
      spec: {
        selector: { matchLabels: labelsOf(service, component) },
        ...(component === 'api' ? { minAvailable: 1 } : { maxUnavailable: 1 }),
      },
    })),
    networkPolicyOf(service, port),
  ];
}

/** Everywhere outside the cluster's private ranges: the provider's API, an SMTP relay. */
const internet = { ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'] } };
const PROVIDER_EGRESS: Partial<Record<ServiceName, object>> = {
  payments: { to: [internet], ports: [{ protocol: 'TCP', port: 443 }] }, // api.stripe.com
  notifications: { to: [internet], ports: [25, 465, 587].map((port) => ({ protocol: 'TCP', port })) }, // SMTP
};

function networkPolicyOf(service: ServiceName, port: number): object {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: service, labels: labelsOf(service) },
    spec: {
      podSelector: { matchLabels: { 'app.kubernetes.io/name': service } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: [{ protocol: 'TCP', port }] }], // its API, probes and /metrics
      egress: [
        // Its database: pods labelled as the database (CloudNativePG's, in dev), or the
        // external server the production overlay names.
        {
          to: [{ podSelector: { matchLabels: { 'idem.dev/database': 'true' } } }],
          ports: [{ protocol: 'TCP', port: 5432 }],
        },
        { to: [{ podSelector: { matchLabels: REDIS_POD_LABEL } }], ports: [{ protocol: 'TCP', port: 6379 }] },
        // Traces, to a collector in the observability namespace.
        {
          to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } } }],
          ports: [{ protocol: 'TCP', port: 4318 }],
        },
        ...(PROVIDER_EGRESS[service] ? [PROVIDER_EGRESS[service]] : []),
      ],
    },
  };
}

function sharedObjects(): Record<string, object[]> {
  const alerts = parse(readFileSync(join(root, 'infra/prometheus/alerts.yml'), 'utf8')) as { groups: object[] };
  return {
    'config.yaml': [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'idem-config', labels: labelsOf('idem') },
        data: { IDEM_QUEUE_PREFIX: QUEUE_PREFIX, LOG_LEVEL: 'info', TRUST_PROXY: INGRESS_ADDRESS_RANGE },
      },
    ],
    'redis.yaml': redisObjects(),
    'network-policies.yaml': [
      {
        // Nothing reaches idem's pods, and they reach nothing, but what a policy allows.
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'idem-default-deny', labels: labelsOf('idem') },
        spec: {
          podSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'idem' } },
          policyTypes: ['Ingress', 'Egress'],
        },
      },
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'idem-dns', labels: labelsOf('idem') },
        spec: {
          podSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'idem' } },
          policyTypes: ['Egress'],
          egress: [
            {
              to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }],
              ports: [
                { protocol: 'UDP', port: 53 },
                { protocol: 'TCP', port: 53 },
              ],
            },
          ],
        },
      },
    ],
    'prometheus-rule.yaml': [
      {
        apiVersion: 'monitoring.coreos.com/v1',
        kind: 'PrometheusRule',
        metadata: { name: 'idem', labels: labelsOf('idem') },
        spec: { groups: alerts.groups }, // infra/prometheus/alerts.yml, as compose's Prometheus loads it
      },
    ],
  };
}

/**
 * Who may reach the pods that serve Redis: idem's pods, and KEDA's operator pods (not all of its
 * namespace), which read the wait lists, on the client port; and whatever else `more` lets in.
 */
function redisIngressPolicy(name: string, ...more: object[]): object {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, labels: labelsOf(name) },
    spec: {
      podSelector: { matchLabels: REDIS_POD_LABEL },
      policyTypes: ['Ingress'],
      ingress: [
        {
          from: [
            { podSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'idem' } } },
            KEDA_OPERATOR_PODS, // one peer: its namespace and its label, both
          ],
          ports: [{ protocol: 'TCP', port: 6379 }],
        },
        ...more,
      ],
    },
  };
}

/** Each user of redis-users.acl: the variable Redis's container reads its password into, from which Secret. */
const REDIS_USER_PASSWORDS = [
  ...SERVICE_NAMES.map((service) => ({
    user: `idem-${service}`,
    variable: `REDIS_USER_${service.toUpperCase()}`,
    secret: 'idem-redis-users',
    key: service,
  })),
  { user: KEDA_REDIS_USER, variable: 'REDIS_USER_KEDA', secret: KEDA_REDIS_SECRET, key: 'password' },
  {
    user: SCRIPT_WATCHER_REDIS_USER,
    variable: 'REDIS_USER_SCRIPT_WATCHER',
    secret: SCRIPT_WATCHER_REDIS_SECRET,
    key: 'password',
  },
];

/**
 * Redis's start: the ACL file, from the generated template with each user's password in place of
 * its `{{<user>}}` (passwords of letters, digits, `-` and `_`), into memory, then the server. A
 * placeholder left (a user whose password it is not given) stops it: anyone could read that one.
 */
const REDIS_START = [
  'set -eu',
  'umask 077',
  '{ echo "user default on >$REDIS_PASSWORD ~* &* +@all"',
  `  sed ${REDIS_USER_PASSWORDS.map(({ user, variable }) => `-e "s/{{${user}}}/$${variable}/"`).join(' ')} /etc/idem-redis/redis-users.acl | grep -v '^#'`,
  '} > /run/idem-redis/users.acl',
  "if grep -q '{{' /run/idem-redis/users.acl; then echo 'redis-users.acl has a user without a password' >&2; exit 1; fi",
  'exec redis-server "$@"',
].join('\n');

/** The watcher's loop, as compose runs it too. */
const SCRIPT_WATCHER = readFileSync(join(root, 'infra/redis-script-watcher.sh'), 'utf8');

function redisObjects(): object[] {
  const labels = labelsOf('redis');
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'redis', labels },
      spec: {
        serviceName: 'redis',
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels: { ...labels, ...REDIS_POD_LABEL } },
          spec: {
            automountServiceAccountToken: false,
            securityContext: runningAs(999), // the image's `redis` user
            containers: [
              {
                name: 'redis',
                image: 'docker.io/library/redis:7.4.6-alpine', // the Lua sandbox fixes (docs/operations.md)
                imagePullPolicy: 'IfNotPresent',
                // The users — each service's own, KEDA's and the script watcher's (redis-users.acl,
                // their passwords from idem-redis-users, idem-redis-keda, idem-redis-script-watcher)
                // and `default` for operators — are written to a file in memory at start:
                // no password is ever on the command line (which `ps` shows on the node). BullMQ
                // needs what it writes kept (append-only file) and never evicted.
                command: ['sh', '-c', REDIS_START, 'redis'],
                args: [
                  '--aclfile',
                  '/run/idem-redis/users.acl',
                  '--appendonly',
                  'yes',
                  '--maxmemory',
                  '$(REDIS_MAXMEMORY)',
                  '--maxmemory-policy',
                  'noeviction',
                  '--busy-reply-threshold',
                  '1000',
                  '--dir',
                  '/data',
                ],
                env: [
                  { name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'idem-redis', key: 'password' } } },
                  // Second: the production overlay patches REDIS_MAXMEMORY by its position.
                  { name: 'REDIS_MAXMEMORY', value: '256mb' },
                  ...REDIS_USER_PASSWORDS.map(({ variable, secret, key }) => ({
                    name: variable,
                    valueFrom: { secretKeyRef: { name: secret, key } },
                  })),
                  // redis-cli's own variable: the probe passes no password on its command line either.
                  { name: 'REDISCLI_AUTH', valueFrom: { secretKeyRef: { name: 'idem-redis', key: 'password' } } },
                ],
                ports: [{ name: 'redis', containerPort: 6379 }],
                readinessProbe: {
                  exec: {
                    command: ['sh', '-c', 'redis-cli ping | grep -q PONG'],
                  },
                  periodSeconds: 5,
                },
                livenessProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 10 },
                resources: { requests: { cpu: '250m', memory: '320Mi' }, limits: { cpu: '1', memory: '512Mi' } },
                securityContext: restricted,
                volumeMounts: [
                  { name: 'data', mountPath: '/data' },
                  { name: 'users', mountPath: '/etc/idem-redis', readOnly: true },
                  { name: 'acl', mountPath: '/run/idem-redis' },
                ],
              },
              {
                // Kills a script that never ends, over the pod's loopback (docs/operations.md): no
                // service may. Its user may PING and SCRIPT KILL, nothing else.
                name: 'script-watcher',
                image: 'docker.io/library/redis:7.4.6-alpine',
                imagePullPolicy: 'IfNotPresent',
                command: ['sh', '-c', SCRIPT_WATCHER, 'script-watcher'],
                env: [
                  { name: 'REDIS_USER', value: SCRIPT_WATCHER_REDIS_USER },
                  // redis-cli's own variable: never on its command line.
                  {
                    name: 'REDISCLI_AUTH',
                    valueFrom: { secretKeyRef: { name: SCRIPT_WATCHER_REDIS_SECRET, key: 'password' } },
                  },
                ],
                resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } },
                securityContext: restricted,
              },
            ],
            volumes: [
              { name: 'users', configMap: { name: 'redis-users' } },
              { name: 'acl', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
            ],
          },
        },
        volumeClaimTemplates: [
          {
            metadata: { name: 'data' },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '2Gi' } } },
          },
        ],
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'redis', labels },
      spec: { selector: labels, ports: [{ name: 'redis', port: 6379, targetPort: 'redis' }] },
    },
    redisIngressPolicy('redis'),
    {
      // KEDA logs in as its own user, which reads the wait lists' length and nothing else.
      apiVersion: 'keda.sh/v1alpha1',
      kind: 'TriggerAuthentication',
      metadata: { name: 'idem-redis', labels },
      spec: {
        secretTargetRef: ['username', 'password'].map((key) => ({ parameter: key, name: KEDA_REDIS_SECRET, key })),
      },
    },
  ];
}

/**
 * The kustomize Component that moves the queues to a Redis Cluster the overlay does not run (an
 * operator's or a chart's, its pods labelled REDIS_POD_LABEL): the base's one Redis removed, a
 * Service in front of the cluster's nodes (any node is a seed: the clients learn the slots from
 * it), their ingress, and KEDA's `redis-cluster` scaler on the hash-tagged wait lists.
 */
function redisClusterComponent(): { objects: object[]; kustomization: object } {
  const deleted = [
    ['apps/v1', 'StatefulSet'],
    ['v1', 'Service'],
    ['networking.k8s.io/v1', 'NetworkPolicy'],
  ].map(([apiVersion, kind]) => ({
    patch: stringify({ $patch: 'delete', apiVersion, kind, metadata: { name: 'redis' } }),
  }));
  const triggers = SERVICE_NAMES.map((service) => ({
    target: { kind: 'ScaledObject', name: `${service}-worker` },
    patch: stringify([{ op: 'replace', path: '/spec/triggers', value: scalerTriggersOf(service, { cluster: true }) }], {
      lineWidth: 0,
    }),
  }));
  const objects = [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'redis-cluster', labels: labelsOf('redis-cluster') },
      spec: { selector: REDIS_POD_LABEL, ports: [{ name: 'redis', port: 6379, targetPort: 6379 }] },
    },
    // The nodes to each other: replication on the client port, the cluster bus 10000 above it.
    redisIngressPolicy('redis-cluster', {
      from: [{ podSelector: { matchLabels: REDIS_POD_LABEL } }],
      ports: [6379, 16379].map((port) => ({ protocol: 'TCP', port })),
    }),
  ];
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1alpha1',
    kind: 'Component',
    resources: ['redis-cluster.yaml'],
    patches: [...deleted, ...triggers],
    // KEDA's operator resolves the address from its own namespace: name the overlay's.
    replacements: [
      {
        source: { kind: 'Namespace', fieldPath: 'metadata.name' },
        targets: [
          {
            select: { kind: 'ScaledObject' },
            fieldPaths: ['spec.triggers.*.metadata.addresses'],
            options: { delimiter: '.', index: 1 },
          },
        ],
      },
    ],
  };
  return { objects, kustomization };
}

const HEADER = '# Generated by deploy/kubernetes/generate.ts (pnpm k8s:generate); do not edit.\n';
const yamlOf = (objects: object[]) =>
  HEADER + objects.map((object) => stringify(object, { lineWidth: 0 })).join('---\n');

/**
 * Redis's users: each service's (`idem-<service>`), KEDA's (the wait lists' length) and the
 * script watcher's, for one Redis or for a cluster's hash-tagged queues.
 */
export function redisUsersOf({ cluster = false } = {}) {
  const redisUrl = cluster ? 'redis+cluster://redis-cluster:6379' : 'redis://redis:6379';
  const waitLists = SERVICE_NAMES.flatMap((service) => waitListsOf(service, { cluster }).map(({ key }) => key));
  return [
    ...SERVICE_NAMES.map((service) => {
      return redisUserOf(`idem-${service}`, { prefix: QUEUE_PREFIX, service, redisUrl, ...reachOf(service) });
    }),
    kedaRedisUser(KEDA_REDIS_USER, { waitLists, cluster }),
    // Beside each node, on its loopback: no cluster client.
    scriptWatcherRedisUser(SCRIPT_WATCHER_REDIS_USER),
  ];
}

const ACL_HEADER =
  "# Generated by deploy/kubernetes/generate.ts (pnpm k8s:generate); do not edit. Each service's Redis user:\n" +
  '# only the keys of the queues it consumes and the streams it publishes (their subscribers and positions), and\n' +
  '# of the streams it subscribes to: read, its own positions and leases, and its name added to the subscribers;\n' +
  "# KEDA's, the wait lists' length; the script watcher's, PING and SCRIPT KILL. {{<user>}} is that user's password.\n";

/** What generate.ts writes, by path under deploy/kubernetes: the base and the Redis Cluster component. */
export function generateManifests(): Record<string, string> {
  const files: Record<string, object[]> = {
    ...sharedObjects(),
    ...Object.fromEntries(SERVICE_NAMES.map((service) => [`${service}.yaml`, serviceObjects(service)])),
  };
  const cluster = redisClusterComponent();
  return {
    ...Object.fromEntries(Object.entries(files).map(([name, objects]) => [`base/${name}`, yamlOf(objects)])),
    'base/kustomization.yaml': yamlOf([
      {
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        resources: Object.keys(files),
        // The users Redis starts with (compose's Redis loads the same file).
        configMapGenerator: [{ name: 'redis-users', files: ['redis-users.acl'] }],
      },
    ]),
    'base/redis-users.acl': ACL_HEADER + aclFileTemplate(redisUsersOf()),
    // For the cluster's operator to load on every node (the component runs no Redis of its own).
    'components/redis-cluster/redis-users.acl': ACL_HEADER + aclFileTemplate(redisUsersOf({ cluster: true })),
    'components/redis-cluster/redis-cluster.yaml': yamlOf(cluster.objects),
    'components/redis-cluster/kustomization.yaml': yamlOf([cluster.kustomization]),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = generateManifests();
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(here, path)), { recursive: true });
    writeFileSync(join(here, path), text);
  }
  console.log(`wrote ${Object.keys(files).length} files under ${here}`);
}
