/**
 * The Kubernetes manifests, checked without a cluster: the overlays rendered by kustomize
 * (`kubectl kustomize`, the kustomize every kubectl carries; no npm library renders
 * kustomizations), every object validated against its schema (the `kubernetes-models`
 * packages: Kubernetes, KEDA, the Prometheus operator, CloudNativePG), then held against the
 * code: each container's environment against its service's config schema, ports and probe
 * paths against what the HTTP app serves, KEDA's list keys against the keys BullMQ really
 * writes (on the real Redis, and on a Redis Cluster of the test's own for the overlay that uses
 * one), images and commands against infra/Dockerfile and the bundles.
 */
import { execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual as isEqual } from 'node:util';
import { consumers, SERVICE_NAMES, type ConsumerName, type ServiceName } from '@idem/shop';
import { createHttpApp, DEVELOPMENT_JWT_SECRET, listen } from '@idem/http';
import { SHUTDOWN_TIMEOUT_MS } from '@idem/runtime';
import { SIMULATOR_API_KEY } from '@idem/stripe-sim';
import { clusterReady, connectRedis, mastersOf, queueName } from '@idem/messaging';
import { deleteQueues, redisUrl, startRedisCluster, uniqueName, type RedisCluster } from '@idem/testkit';
import * as cnpg from '@kubernetes-models/cloudnative-pg/postgresql.cnpg.io/v1';
import * as keda from '@kubernetes-models/keda/keda.sh/v1alpha1';
import * as monitoring from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Queue } from 'bullmq';
import * as apps from 'kubernetes-models/apps/v1';
import * as autoscaling from 'kubernetes-models/autoscaling/v2';
import * as networking from 'kubernetes-models/networking.k8s.io/v1';
import * as policy from 'kubernetes-models/policy/v1';
import * as core from 'kubernetes-models/v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ENTRYPOINTS } from '../../scripts/build.js';
import {
  bundlesStartedBy,
  MIGRATE_IMAGE_SERVICES,
  SERVICE_IMAGE_COMMAND,
} from '../../infra/repository/compose-file.js';
import { SERVICE_CONFIGS, unknownVariables } from '../../infra/repository/service-configs.js';
import {
  databaseRolesOf,
  generateManifests,
  KEDA_OPERATOR_PODS,
  KEDA_REDIS_SECRET,
  KEDA_REDIS_USER,
  migratorSecretOf,
  REDIS_POD_LABEL,
  SCRIPT_WATCHER_REDIS_SECRET,
  SCRIPT_WATCHER_REDIS_USER,
  secretVariablesOf,
} from './generate.js';

const here = dirname(fileURLToPath(import.meta.url));
const OVERLAYS = ['dev', 'production', 'production-redis-cluster'] as const;

// A loose view of what kustomize renders; the schemas check the rest.
interface Container {
  name: string;
  image: string;
  imagePullPolicy?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string } }[];
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: { httpGet?: { path: string; port: string } };
  livenessProbe?: { httpGet?: { path: string; port: string } };
  startupProbe?: { httpGet?: { path: string; port: string } };
  lifecycle?: unknown;
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: {
    template?: {
      spec: { containers: Container[]; initContainers?: Container[]; terminationGracePeriodSeconds?: number };
    };
    scaleTargetRef?: { name: string };
    triggers?: { type: string; metadata: Record<string, string>; authenticationRef?: { name: string } }[];
    secretTargetRef?: { parameter: string; name: string; key: string }[];
  };
}

function render(overlay: string): K8sObject[] {
  const text = execFileSync('kubectl', ['kustomize', join(here, 'overlays', overlay)], { encoding: 'utf8' });
  return parseAllDocuments(text).map((document) => document.toJS() as K8sObject);
}

const MODELS: Record<string, Record<string, unknown>> = {
  v1: core,
  'apps/v1': apps,
  'autoscaling/v2': autoscaling,
  'policy/v1': policy,
  'networking.k8s.io/v1': networking,
  'keda.sh/v1alpha1': keda,
  'monitoring.coreos.com/v1': monitoring,
  'postgresql.cnpg.io/v1': cnpg,
};

/** Each object against its kind's schema: `<kind>/<name>: <why>` per invalid one. */
export function schemaProblems(objects: readonly K8sObject[]): string[] {
  return objects.flatMap((object) => {
    const where = `${object.kind}/${object.metadata?.name}`;
    const Model = MODELS[object.apiVersion]?.[object.kind] as (new (data: unknown) => { validate(): void }) | undefined;
    if (!Model) return [`${where}: no schema for ${object.apiVersion} ${object.kind}`];
    // kustomize folds long base64 values over lines; the API server's decoder skips the line
    // breaks (Go's encoding/base64), the schema's "byte" format does not.
    const data = object.kind === 'Secret' && object.data ? { data: unfolded(object.data) } : {};
    try {
      new Model({ ...object, ...data }).validate();
      return [];
    } catch (error) {
      return [`${where}: ${(error as Error).message}`];
    }
  });
}

const unfolded = (data: Record<string, string>) =>
  Object.fromEntries(Object.entries(data).map(([key, value]) => [key, value.replace(/\s/g, '')]));

/** The paths the HTTP app answers for probes, read off a running app (see beforeAll). */
let servedProbePaths: Set<string>;
/** Where BullMQ writes a consumer's waiting jobs, learned from a real Redis and a real Redis Cluster. */
let waitListOf: (prefix: string, consumer: ConsumerName, cluster: boolean) => string;

/** The parameters KEDA's Redis list scalers read (keda.sh/docs/scalers/redis-lists, redis-cluster-lists). */
const SCALER_PARAMETERS: Record<string, readonly string[]> = {
  redis: ['address', 'listName', 'listLength', 'activationListLength', 'enableTLS', 'unsafeSsl', 'databaseIndex'],
  'redis-cluster': ['addresses', 'listName', 'listLength', 'activationListLength', 'enableTLS', 'unsafeSsl'],
};

/** The service an image runs: `idem/<service>` with or without a registry in front. */
const serviceOfImage = (image: string) =>
  SERVICE_NAMES.find((service) => new RegExp(`(^|/)idem/${service}(:|$)`).test(image)) as ServiceName | undefined;

interface PodSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: unknown[];
}

/**
 * The labels of every kind of pod these objects make: each workload's pod template, and each
 * CloudNativePG cluster's instances (its inherited labels and the `cnpg.io/cluster` it adds).
 */
function podsOf(objects: readonly K8sObject[]): { pod: string; labels: Record<string, string> }[] {
  return objects.flatMap((object) => {
    const pod = `${object.kind}/${object.metadata.name}`;
    const spec = object.spec as
      | {
          template?: { metadata?: { labels?: Record<string, string> } };
          jobTemplate?: { spec: { template: { metadata?: { labels?: Record<string, string> } } } };
          inheritedMetadata?: { labels?: Record<string, string> };
        }
      | undefined;
    if (object.kind === 'Cluster' && object.apiVersion.startsWith('postgresql.cnpg.io/'))
      return [{ pod, labels: { ...spec?.inheritedMetadata?.labels, 'cnpg.io/cluster': object.metadata.name } }];
    const template = spec?.template ?? spec?.jobTemplate?.spec.template;
    return template ? [{ pod, labels: template.metadata?.labels ?? {} }] : [];
  });
}

/**
 * The pods no NetworkPolicy restricts: in a namespace that denies by default, a pod that no
 * policy selects for its ingress takes connections from anything in the cluster.
 */
export function podsNoPolicySelects(objects: readonly K8sObject[]): string[] {
  const policies = objects
    .filter((o) => o.kind === 'NetworkPolicy')
    .map((o) => (o as unknown as { spec: { podSelector: PodSelector; policyTypes?: string[] } }).spec)
    .filter((policy) => policy.policyTypes?.includes('Ingress') ?? true);
  const selects = ({ matchLabels = {}, matchExpressions = [] }: PodSelector, labels: Record<string, string>) =>
    matchExpressions.length === 0 && Object.entries(matchLabels).every(([key, value]) => labels[key] === value);
  return podsOf(objects)
    .filter(({ labels }) => !policies.some((policy) => selects(policy.podSelector, labels)))
    .map(({ pod }) => pod);
}

/** What the code would refuse or not find in these objects: one line per problem. */
export function consistencyProblems(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  const configMaps = new Map(objects.filter((o) => o.kind === 'ConfigMap').map((o) => [o.metadata.name, o.data ?? {}]));
  const deployments = objects.filter((o) => o.kind === 'Deployment');
  const prefix = configMaps.get('idem-config')?.IDEM_QUEUE_PREFIX ?? 'idem';

  // A secret on a command line is visible to anyone who can list the node's processes.
  for (const workload of objects.filter((o) => o.spec?.template?.spec.containers)) {
    const pod = workload.spec!.template!.spec;
    for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
      // An unqualified image is docker.io's, in a namespace nobody here owns; an untagged one is `latest`.
      const [first = '', ...path] = container.image.split('/');
      const tag = /:([^:/]+)$/.exec(container.image)?.[1];
      if (path.length === 0 || !/[.:]|^localhost$/.test(first) || !tag || tag === 'latest')
        problems.push(
          `${workload.metadata.name}/${container.name}: image ${container.image} names no registry and tag`,
        );
      if (!container.imagePullPolicy)
        problems.push(`${workload.metadata.name}/${container.name}: no explicit imagePullPolicy`);
      // Only an API serves callers: a worker holds no key that admits one.
      if (workload.metadata.labels?.['app.kubernetes.io/component'] === 'worker') {
        for (const variable of container.env ?? [])
          if (['JWT_SECRET', 'ADMIN_TOKEN'].includes(variable.name))
            problems.push(`${workload.metadata.name}/${container.name}: a worker gets ${variable.name}`);
      }
      const secret = new Set(container.env?.filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name));
      const argv = [...(container.command ?? []), ...(container.args ?? [])].join(' ');
      // Kubernetes itself expands $(VAR) there; a shell's $VAR in a script is the script's business.
      for (const [, name] of argv.matchAll(/\$\((\w+)\)/g)) {
        if (secret.has(name!))
          problems.push(`${workload.metadata.name}/${container.name}: puts the secret ${name} on its command line`);
      }
    }
  }

  /** Which services' APIs read their operator token from each Secret: one token must open one API. */
  const operatorSecrets = new Map<string, Set<string>>();
  for (const deployment of deployments) {
    const pod = deployment.spec!.template!.spec;
    for (const container of pod.containers) {
      const service = serviceOfImage(container.image);
      if (!service) continue;
      const where = `${deployment.metadata.name}/${container.name}`;
      const operatorSecret = container.env?.find((e) => e.name === 'ADMIN_TOKEN')?.valueFrom?.secretKeyRef?.name;
      if (operatorSecret)
        operatorSecrets.set(operatorSecret, new Set([...(operatorSecrets.get(operatorSecret) ?? []), service]));
      // The environment: every variable one the service reads, and all together a valid configuration.
      const fromConfigMaps = Object.assign(
        {},
        ...(container.envFrom ?? []).map((source) => configMaps.get(source.configMapRef!.name) ?? {}),
      ) as Record<string, string>;
      const env: Record<string, string> = { ...fromConfigMaps };
      for (const variable of container.env ?? [])
        env[variable.name] = variable.value ?? placeholderFor(variable.name, env);
      for (const name of unknownVariables(service, Object.keys(env)))
        problems.push(`${where}: ${name} is not a variable ${service} reads`);
      try {
        const config = SERVICE_CONFIGS[service].load(env);
        if (container.ports?.[0]?.containerPort !== config.PORT)
          problems.push(`${where}: containerPort ${container.ports?.[0]?.containerPort} is not PORT ${config.PORT}`);
      } catch (error) {
        problems.push(`${where}: ${service} refuses this configuration: ${(error as Error).message}`);
      }
      // Probes on paths the app serves, on the port it listens on.
      for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe]) {
        if (probe?.httpGet && !servedProbePaths.has(probe.httpGet.path))
          problems.push(`${where}: probe path ${probe.httpGet.path} is not served`);
        if (probe?.httpGet && !container.ports?.some((p) => p.name === probe.httpGet!.port))
          problems.push(`${where}: probe port ${probe.httpGet.port} is not a named port`);
      }
      // The image's own command (infra/Dockerfile) starts what `pnpm build` bundles.
      if (container.command) problems.push(`${where}: overrides the image's command`);
      const bundled = Object.keys(ENTRYPOINTS[`services/${service}`] ?? {}).map((name) => `dist/${name}.js`);
      for (const file of bundlesStartedBy(SERVICE_IMAGE_COMMAND))
        if (!bundled.includes(file)) problems.push(`${where}: the image starts ${file}, not bundled`);
      // Shutdown: SIGTERM, a preStop drain for the API, then the runtime's bound, within the grace period.
      const drain = container.lifecycle ? 5 : 0;
      if ((pod.terminationGracePeriodSeconds ?? 30) * 1000 <= SHUTDOWN_TIMEOUT_MS + drain * 1000)
        problems.push(`${where}: terminationGracePeriodSeconds does not cover the shutdown bound`);
      // Migrations first, by the service's own migrate bundle in the migrate image.
      const migrate = pod.initContainers?.find((c) => c.name === 'migrate');
      const expected = ['node', `services/${service}/dist/migrate.js`];
      if (
        !migrate ||
        !/(^|\/)idem\/migrate(:|$)/.test(migrate.image) ||
        migrate.command?.join(' ') !== expected.join(' ')
      )
        problems.push(`${where}: no migrate init container running ${expected.join(' ')}`);
      else if (!MIGRATE_IMAGE_SERVICES.includes(service) || !ENTRYPOINTS[`services/${service}`]?.migrate)
        problems.push(`${where}: the migrate image has no ${expected[1]}`);
      // The service runs as its runtime role; only its migrations run as the role that owns the database.
      const secretOf = (c: Container | undefined) =>
        c?.env?.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef?.name;
      if (secretOf(migrate) !== migratorSecretOf(service) || secretOf(container) !== `${service}-database`)
        problems.push(`${where}: DATABASE_URL is not the runtime role's, or the migrator's is not the owner's`);
      if (migrate?.env?.find((e) => e.name === 'DATABASE_RUNTIME_ROLE')?.value !== databaseRolesOf(service).runtime)
        problems.push(`${where}: the migrator does not grant ${databaseRolesOf(service).runtime}`);
    }
  }

  // KEDA: one ScaledObject per worker Deployment, reading the wait list of each of its consumers
  // with a scaler for lists (one Redis's, or a cluster's), at an address KEDA's operator (in its
  // own namespace) resolves to a Service of this namespace.
  for (const scaled of objects.filter((o) => o.kind === 'ScaledObject')) {
    for (const trigger of scaled.spec!.triggers ?? []) {
      const parameters = SCALER_PARAMETERS[trigger.type];
      if (!parameters) problems.push(`ScaledObject/${scaled.metadata.name}: no list scaler named ${trigger.type}`);
      for (const parameter of Object.keys(trigger.metadata).filter((p) => parameters && !parameters.includes(p)))
        problems.push(`ScaledObject/${scaled.metadata.name}: KEDA's ${trigger.type} scaler reads no ${parameter}`);
      const addresses = trigger.metadata.address ?? trigger.metadata.addresses ?? '';
      for (const address of addresses.split(',')) {
        const [host = '', port] = address.split(':');
        const [name, namespace, ...rest] = host.split('.');
        const service = objects.find(
          (o) => o.kind === 'Service' && o.metadata.name === name && o.metadata.namespace === scaled.metadata.namespace,
        ) as (K8sObject & { spec?: { ports?: { port: number }[] } }) | undefined;
        if (
          namespace !== scaled.metadata.namespace ||
          !['', 'svc', 'svc.cluster.local'].includes(rest.join('.')) ||
          !service?.spec?.ports?.some((p) => String(p.port) === port)
        )
          problems.push(
            `ScaledObject/${scaled.metadata.name}: KEDA resolves ${address} from its own namespace, not to a Service of ${scaled.metadata.namespace}`,
          );
      }
    }
    const target = scaled.spec!.scaleTargetRef!.name;
    const service = SERVICE_NAMES.find((s) => `${s}-worker` === target);
    if (!service || !deployments.some((d) => d.metadata.name === target)) {
      problems.push(`ScaledObject/${scaled.metadata.name}: scales ${target}, not a worker Deployment here`);
      continue;
    }
    const cluster = scaled.spec!.triggers!.some((t) => t.type === 'redis-cluster');
    const expected = (Object.keys(consumers) as ConsumerName[])
      .filter((consumer) => consumer.startsWith(`${service}.`))
      .map((consumer) => waitListOf(prefix, consumer, cluster))
      .sort();
    const actual = scaled.spec!.triggers!.map((t) => t.metadata.listName!).sort();
    if (JSON.stringify(actual) !== JSON.stringify(expected))
      problems.push(
        `ScaledObject/${scaled.metadata.name}: reads ${actual.join(', ')}; BullMQ waits in ${expected.join(', ')}`,
      );
  }
  for (const [secret, services] of operatorSecrets)
    if (services.size > 1)
      problems.push(
        `Secret/${secret}: the ADMIN_TOKEN of ${[...services].sort().join(' and ')}: one token opens every one of them`,
      );
  return problems;
}

/** A plausible value for a variable set from a Secret, so the configuration can be loaded. */
function placeholderFor(name: string, env: Record<string, string>): string {
  const values: Record<string, string> = {
    DATABASE_URL: 'postgresql://service:secret@db:5432/service',
    REDIS_URL: 'redis://:secret@redis:6379',
    SMTP_URL: 'smtp://relay:587',
    STRIPE_API_KEY: env.PAYMENT_PROVIDER === 'simulator' ? SIMULATOR_API_KEY : 'sk_test_0123456789abcdefghijklmn',
  };
  return values[name] ?? 'x'.repeat(40);
}

let rendered: Record<(typeof OVERLAYS)[number], K8sObject[]>;
const queuePrefix = uniqueName('idem_test_k8s');
let cluster: RedisCluster | undefined;

/** Adds a job to each consumer's queue, named as the services name it, and sees which list BullMQ keeps it in. */
async function learnWaitLists(url: string): Promise<Map<string, string>> {
  const redis = connectRedis(url);
  const learned = new Map<string, string>();
  try {
    await clusterReady(redis);
    for (const consumer of Object.keys(consumers)) {
      const queue = new Queue(queueName(consumer, url), { prefix: queuePrefix, connection: redis });
      await queue.add('probe', {});
      await queue.close();
      const lists = [];
      for (const master of mastersOf(redis))
        for (const key of await master.keys(`${queuePrefix}:${queueName(consumer, url)}:*`))
          if ((await redis.type(key)) === 'list' && (await redis.llen(key)) === 1) lists.push(key);
      expect(lists, consumer).toHaveLength(1);
      learned.set(consumer, lists[0]!.slice(queuePrefix.length));
    }
  } finally {
    redis.disconnect();
  }
  return learned;
}

beforeAll(async () => {
  rendered = Object.fromEntries(OVERLAYS.map((overlay) => [overlay, render(overlay)])) as typeof rendered;
  const app = await listen(createHttpApp({ health: {}, routes: () => {} }), 0);
  try {
    const paths = ['/health', '/health/live', '/metrics', '/ready', '/healthz'];
    const answered = await Promise.all(
      paths.map(async (path) => [path, (await fetch(`http://127.0.0.1:${app.port}${path}`)).status] as const),
    );
    servedProbePaths = new Set(answered.filter(([, status]) => status === 200).map(([path]) => path));
  } finally {
    await app.close();
  }
  cluster = await startRedisCluster({ firstPort: randomInt(31_200, 31_290) });
  const learned = { single: await learnWaitLists(redisUrl), cluster: await learnWaitLists(cluster.url) };
  waitListOf = (prefix, consumer, onCluster) => `${prefix}${learned[onCluster ? 'cluster' : 'single'].get(consumer)}`;
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  await deleteQueues(queuePrefix);
});

describe('deploy/kubernetes', () => {
  it('has the base and the Redis Cluster component generate.ts writes from the code (pnpm k8s:generate)', () => {
    for (const [path, text] of Object.entries(generateManifests()))
      expect(readFileSync(join(here, path), 'utf8'), path).toBe(text);
  });

  it.each(OVERLAYS)(
    'renders the %s overlay into objects valid against the Kubernetes, KEDA, Prometheus operator and CloudNativePG schemas',
    (overlay) => {
      expect(rendered[overlay].length).toBeGreaterThan(40);
      expect(schemaProblems(rendered[overlay])).toEqual([]);
    },
  );

  it.each(OVERLAYS)(
    'gives the %s overlay environments, ports, probes, commands and queue keys the code agrees with',
    (overlay) => {
      expect(consistencyProblems(rendered[overlay])).toEqual([]);
    },
  );

  it('has an API and a worker Deployment per service, an HPA on each API and a ScaledObject on each worker', () => {
    const names = (kind: string) =>
      rendered.production
        .filter((o) => o.kind === kind)
        .map((o) => o.metadata.name)
        .sort();
    expect(names('Deployment')).toEqual(SERVICE_NAMES.flatMap((s) => [`${s}-api`, `${s}-worker`]).sort());
    expect(names('HorizontalPodAutoscaler')).toEqual(SERVICE_NAMES.map((s) => `${s}-api`).sort());
    expect(names('ScaledObject')).toEqual(SERVICE_NAMES.map((s) => `${s}-worker`).sort());
    expect(names('Service')).toEqual([...SERVICE_NAMES, 'redis'].sort());
  });

  it("puts the queues on a Redis Cluster in its overlay: no Redis of its own, a Service in front of the cluster's labelled nodes, which the services reach and whose nodes reach each other", () => {
    const objects = rendered['production-redis-cluster'];
    interface Rule {
      to?: { podSelector?: { matchLabels?: object } }[];
      from?: { podSelector?: { matchLabels?: object } }[];
      ports?: { port: number }[];
    }
    const find = (kind: string, name: string) =>
      objects.find((o) => o.kind === kind && o.metadata.name === name) as unknown as {
        spec: { selector?: object; podSelector?: object; egress: Rule[]; ingress: Rule[] };
      };
    const toRedisNodes = (rule: Rule) =>
      [...(rule.to ?? []), ...(rule.from ?? [])].some((peer) =>
        isEqual(peer.podSelector?.matchLabels, REDIS_POD_LABEL),
      );
    expect(objects.filter((o) => o.kind === 'StatefulSet')).toEqual([]);
    expect(
      objects
        .filter((o) => o.kind === 'Service')
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual([...SERVICE_NAMES, 'redis-cluster'].sort());
    expect(find('Service', 'redis-cluster').spec.selector).toEqual(REDIS_POD_LABEL);
    for (const service of SERVICE_NAMES)
      expect(find('NetworkPolicy', service).spec.egress.find(toRedisNodes)?.ports, service).toEqual([
        { protocol: 'TCP', port: 6379 },
      ]);
    const nodes = find('NetworkPolicy', 'redis-cluster').spec;
    expect(nodes.podSelector).toEqual({ matchLabels: REDIS_POD_LABEL });
    // The nodes reach each other for replication and on the cluster bus.
    expect(nodes.ingress.find(toRedisNodes)?.ports?.map((p) => p.port)).toEqual([6379, 16379]);
    const types = objects.flatMap((o) => o.spec?.triggers ?? []).map((t) => t.type);
    expect(new Set(types)).toEqual(new Set(['redis-cluster']));
  });

  it.each(OVERLAYS)(
    "lets KEDA's operator pods alone reach Redis in the %s overlay, as a user that reads the wait lists' length and nothing else",
    (overlay) => {
      const objects = rendered[overlay];
      const cluster = overlay === 'production-redis-cluster';
      const auth = objects.find((o) => o.kind === 'TriggerAuthentication' && o.metadata.name === 'idem-redis')!;
      expect(auth.spec!.secretTargetRef).toEqual([
        { parameter: 'username', name: KEDA_REDIS_SECRET, key: 'username' },
        { parameter: 'password', name: KEDA_REDIS_SECRET, key: 'password' },
      ]);
      const triggers = objects.filter((o) => o.kind === 'ScaledObject').flatMap((o) => o.spec!.triggers!);
      expect(new Set(triggers.map((t) => t.authenticationRef?.name))).toEqual(new Set(['idem-redis']));
      // Its user in the users file Redis loads (a cluster's operator loads the component's): the
      // triggers' lists as its only keys, and KEDA's commands.
      const acl = cluster
        ? readFileSync(join(here, 'components/redis-cluster/redis-users.acl'), 'utf8')
        : objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('redis-users'))!.data![
            'redis-users.acl'
          ]!;
      const rules = acl
        .split('\n')
        .find((line) => line.startsWith(`user ${KEDA_REDIS_USER} on `))!
        .split(' ')
        .slice(4);
      expect(rules.filter((rule) => rule.startsWith('~')).sort()).toEqual(
        [...new Set(triggers.map((t) => `~${t.metadata.listName}`))].sort(),
      );
      expect(rules.filter((rule) => !rule.startsWith('~'))).toEqual([
        'resetchannels',
        '+ping',
        '+eval',
        '+type',
        '+llen',
        ...(cluster ? ['+cluster|slots', '+command'] : []),
      ]);
      // Redis's client port: idem's pods, and KEDA's operator pods in KEDA's namespace (one peer:
      // both selectors), not every pod of that namespace.
      const policy = objects.find(
        (o) => o.kind === 'NetworkPolicy' && o.metadata.name === (cluster ? 'redis-cluster' : 'redis'),
      ) as unknown as { spec: { ingress: { from: object[]; ports: object[] }[] } };
      const [clients, ...others] = policy.spec.ingress;
      expect(clients).toEqual({
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'idem' } } }, KEDA_OPERATOR_PODS],
        ports: [{ protocol: 'TCP', port: 6379 }],
      });
      for (const rule of others) expect(rule.from).toEqual([{ podSelector: { matchLabels: REDIS_POD_LABEL } }]);
    },
  );

  it.each(['dev', 'production'] as const)(
    "runs the script watcher beside Redis in the %s overlay: compose's loop, as a user that may only PING and SCRIPT KILL",
    (overlay) => {
      const redis = rendered[overlay].find((o) => o.kind === 'StatefulSet' && o.metadata.name === 'redis')!;
      const watcher = redis.spec!.template!.spec.containers.find((c) => c.name === 'script-watcher')!;
      expect(watcher.command).toEqual([
        'sh',
        '-c',
        readFileSync(join(here, '../../infra/redis-script-watcher.sh'), 'utf8'),
        'script-watcher',
      ]);
      expect(watcher.env).toEqual([
        { name: 'REDIS_USER', value: SCRIPT_WATCHER_REDIS_USER },
        { name: 'REDISCLI_AUTH', valueFrom: { secretKeyRef: { name: SCRIPT_WATCHER_REDIS_SECRET, key: 'password' } } },
      ]);
      const acl = rendered[overlay].find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('redis-users'))!
        .data!['redis-users.acl']!;
      expect(acl.split('\n')).toContain(
        `user ${SCRIPT_WATCHER_REDIS_USER} on >{{${SCRIPT_WATCHER_REDIS_USER}}} resetchannels +ping +script|kill`,
      );
    },
  );

  it.each(OVERLAYS)('selects every pod of the %s overlay with a NetworkPolicy on its ingress', (overlay) => {
    expect(podsOf(rendered[overlay]).length).toBeGreaterThanOrEqual(2 * SERVICE_NAMES.length);
    expect(podsNoPolicySelects(rendered[overlay])).toEqual([]);
  });

  it('would notice a pod that no NetworkPolicy selects', () => {
    const objects = structuredClone(rendered.dev);
    const mailpit = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'mailpit')!;
    (mailpit.spec!.template as unknown as { metadata: { labels: Record<string, string> } }).metadata.labels = {
      'app.kubernetes.io/name': 'mail',
    };
    expect(podsNoPolicySelects(objects)).toEqual(['Deployment/mailpit']);
  });

  it('keeps every variable the base reads from a Secret reading it from that Secret in each overlay (a patch by position cannot overwrite one)', () => {
    const fromSecrets = (objects: readonly K8sObject[]) =>
      objects.flatMap((o) =>
        [...(o.spec?.template?.spec.containers ?? []), ...(o.spec?.template?.spec.initContainers ?? [])].flatMap((c) =>
          (c.env ?? [])
            .filter((e) => e.valueFrom?.secretKeyRef)
            .map(
              (e) =>
                `${o.kind}/${o.metadata.name}/${c.name} ${e.name} ← ${e.valueFrom!.secretKeyRef!.name}.${e.valueFrom!.secretKeyRef!.key}` +
                (e.value === undefined ? '' : ` and the value ${e.value}`),
            ),
        ),
      );
    const base = parseAllDocuments(
      execFileSync('kubectl', ['kustomize', join(here, 'base')], { encoding: 'utf8' }),
    ).map((d) => d.toJS() as K8sObject);
    for (const overlay of OVERLAYS) {
      // A Redis Cluster overlay runs no Redis of its own: the base's reads but Redis's own.
      const expected = fromSecrets(base).filter(
        (line) => overlay !== 'production-redis-cluster' || !line.startsWith('StatefulSet/redis/'),
      );
      expect(fromSecrets(rendered[overlay]), overlay).toEqual(expected);
    }
  });

  it('renders no Secret for production, and documents every Secret the pods reference', () => {
    expect(rendered.production.filter((o) => o.kind === 'Secret')).toEqual([]);
    const documented = readFileSync(join(here, 'README.md'), 'utf8');
    // What the pods read: the services' variables, the migrators', and Redis's own (its users' passwords).
    const redis = rendered.production.find((o) => o.kind === 'StatefulSet' && o.metadata.name === 'redis')!;
    const referenced = new Set([
      ...SERVICE_NAMES.flatMap((s) => [
        ...secretVariablesOf(s).map((v) => `${v.secret}.${v.key}`),
        `${migratorSecretOf(s)}.url`,
      ]),
      // KEDA's, through its TriggerAuthentication.
      ...rendered.production
        .filter((o) => o.kind === 'TriggerAuthentication')
        .flatMap((o) => o.spec!.secretTargetRef!.map((ref) => `${ref.name}.${ref.key}`)),
      ...redis.spec!.template!.spec.containers.flatMap((c) =>
        (c.env ?? []).flatMap((e) =>
          e.valueFrom?.secretKeyRef ? [`${e.valueFrom.secretKeyRef.name}.${e.valueFrom.secretKeyRef.key}`] : [],
        ),
      ),
    ]);
    for (const reference of referenced) {
      const [name, key] = reference.split('.');
      expect(documented, reference).toMatch(new RegExp(`\\|\\s*\`${name}\`\\s*\\|[^|]*\`${key}\``));
    }
    // ... and dev generates exactly those (plus what CloudNativePG's roles need).
    const devSecrets = rendered.dev.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name);
    expect(new Set(devSecrets)).toEqual(new Set([...referenced].map((r) => r.split('.')[0])));
  });

  it('runs production with no development aid: no fault switches, no journal, no demo data, no development key', () => {
    for (const overlay of ['production', 'production-redis-cluster'] as const)
      expect(developmentAidsIn(rendered[overlay]), overlay).toEqual([]);
  });

  it('keeps the teaching switches off in every overlay, dev included: no fault switches, no lessons', () => {
    for (const [overlay, objects] of Object.entries(rendered))
      expect(
        developmentAidsIn(objects).filter((problem) => /fault switches|lessons/.test(problem)),
        overlay,
      ).toEqual([]);
  });

  it('would notice a development aid in production', () => {
    const objects = structuredClone(rendered.production);
    const config = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'idem-config')!;
    config.data = { ...config.data, IDEM_FAULTS_ENABLED: '1', DELIVERY_JOURNAL: 'true', CONSOLE_LESSONS: '1' };
    const api = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'orders-api')!;
    const container = api.spec!.template!.spec.containers[0]!;
    container.env = [...(container.env ?? []), { name: 'JWT_SECRET', value: DEVELOPMENT_JWT_SECRET }];
    container.command = ['node', 'dist/seed.js'];
    expect(developmentAidsIn(objects)).toEqual([
      'ConfigMap/idem-config: IDEM_FAULTS_ENABLED=1 turns the fault switches on',
      'ConfigMap/idem-config: DELIVERY_JOURNAL=true keeps the delivery journal',
      'ConfigMap/idem-config: CONSOLE_LESSONS=1 runs the lessons (they create databases)',
      'Deployment/orders-api/orders: seeds demo data (node dist/seed.js)',
      'Deployment/orders-api/orders: JWT_SECRET is a development key, public in this repository',
    ]);
  });

  describe('fails on what would break a deployment', () => {
    const mutated = (change: (objects: K8sObject[]) => void, overlay: (typeof OVERLAYS)[number] = 'dev') => {
      const objects = structuredClone(rendered[overlay]);
      change(objects);
      return objects;
    };
    const find = (objects: K8sObject[], kind: string, name: string) =>
      objects.find((o) => o.kind === kind && o.metadata.name === name)!;

    it('a secret on a command line', () => {
      const objects = mutated((o) =>
        find(o, 'StatefulSet', 'redis').spec!.template!.spec.containers[0]!.args!.push(
          '--requirepass',
          '$(REDIS_PASSWORD)',
        ),
      );
      expect(consistencyProblems(objects)).toEqual(['redis/redis: puts the secret REDIS_PASSWORD on its command line']);
    });

    it("an operator token two APIs share: notifications' would open orders", () => {
      const objects = mutated((o) => {
        const env = find(o, 'Deployment', 'notifications-api').spec!.template!.spec.containers[0]!.env!;
        env.find((e) => e.name === 'ADMIN_TOKEN')!.valueFrom!.secretKeyRef!.name = 'orders-admin';
      });
      expect(consistencyProblems(objects)).toEqual([
        'Secret/orders-admin: the ADMIN_TOKEN of notifications and orders: one token opens every one of them',
      ]);
    });

    it("a KEDA trigger's address that does not name the namespace (KEDA looks it up in its own)", () => {
      const objects = mutated((o) => {
        for (const trigger of find(o, 'ScaledObject', 'orders-worker').spec!.triggers!)
          trigger.metadata.address = 'redis:6379';
      });
      const problems = consistencyProblems(objects);
      expect(problems.length).toBeGreaterThan(0);
      for (const problem of problems)
        expect(problem).toMatch(/^ScaledObject\/orders-worker: KEDA resolves redis:6379 from its own namespace/);
    });

    it("a cluster's scaler given one Redis's address, or a wait list without the queue's hash tag", () => {
      const objects = mutated((o) => {
        const [first, second] = find(o, 'ScaledObject', 'payments-worker').spec!.triggers!;
        first!.metadata.address = first!.metadata.addresses!;
        delete first!.metadata.addresses;
        second!.metadata.listName = second!.metadata.listName!.replace(/[{}]/g, '');
      }, 'production-redis-cluster');
      expect(consistencyProblems(objects)).toEqual([
        "ScaledObject/payments-worker: KEDA's redis-cluster scaler reads no address",
        expect.stringMatching(/^ScaledObject\/payments-worker: reads .*BullMQ waits in/),
      ]);
    });

    it('a misspelt environment variable', () => {
      const objects = mutated((o) =>
        find(o, 'Deployment', 'orders-api').spec!.template!.spec.containers[0]!.env!.push({
          name: 'DATABSE_URL',
          value: 'x',
        }),
      );
      expect(consistencyProblems(objects)).toEqual(['orders-api/orders: DATABSE_URL is not a variable orders reads']);
    });

    it('a wrong queue key', () => {
      const objects = mutated((o) => {
        find(o, 'ScaledObject', 'inventory-worker').spec!.triggers![0]!.metadata.listName =
          'idem:inventory.order-placed.v1:waiting';
      });
      expect(consistencyProblems(objects)).toEqual([
        expect.stringMatching(/^ScaledObject\/inventory-worker: reads .*BullMQ waits in/),
      ]);
    });

    it('an invalid field', () => {
      const objects = mutated((o) => {
        (find(o, 'Deployment', 'payments-worker').spec as Record<string, unknown>).replicas = 'two';
        (find(o, 'ScaledObject', 'payments-worker').spec as Record<string, unknown>).minReplicaCount = 'one';
      });
      expect(schemaProblems(objects)).toEqual([
        expect.stringMatching(/^Deployment\/payments-worker: .*replicas/),
        expect.stringMatching(/^ScaledObject\/payments-worker: .*minReplicaCount/),
      ]);
    });

    it('a port or probe path the service does not serve', () => {
      const objects = mutated((o) => {
        const container = find(o, 'Deployment', 'notifications-api').spec!.template!.spec.containers[0]!;
        container.ports![0]!.containerPort = 8080;
        container.livenessProbe!.httpGet!.path = '/livez';
      });
      expect(consistencyProblems(objects)).toEqual([
        'notifications-api/notifications: containerPort 8080 is not PORT 3004',
        'notifications-api/notifications: probe path /livez is not served',
      ]);
    });
  });
});

/**
 * What of a development system a rendering would run: fault switches, the lessons or the delivery
 * journal turned on (in a ConfigMap or a container's environment), a container that seeds the demo shop,
 * or a key that is public in this repository (the development signing key, the simulator's
 * placeholder).
 */
function developmentAidsIn(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  const PUBLIC_KEYS = new Set([DEVELOPMENT_JWT_SECRET, SIMULATOR_API_KEY]);
  const settings = (where: string, values: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(values)) {
      if (name === 'IDEM_FAULTS_ENABLED' && /^(1|true)$/i.test(value ?? ''))
        problems.push(`${where}: IDEM_FAULTS_ENABLED=${value} turns the fault switches on`);
      if (name === 'CONSOLE_LESSONS' && value === '1')
        problems.push(`${where}: CONSOLE_LESSONS=1 runs the lessons (they create databases)`);
      if (name === 'DELIVERY_JOURNAL' && /^(1|true|on)$/i.test(value ?? ''))
        problems.push(`${where}: DELIVERY_JOURNAL=${value} keeps the delivery journal`);
      if (value !== undefined && PUBLIC_KEYS.has(value))
        problems.push(`${where}: ${name} is a development key, public in this repository`);
    }
  };
  for (const object of objects) {
    if (object.kind === 'ConfigMap') settings(`ConfigMap/${object.metadata.name}`, object.data ?? {});
    const pod = object.spec?.template?.spec;
    for (const container of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])]) {
      const where = `${object.kind}/${object.metadata.name}/${container.name}`;
      const commandLine = [...(container.command ?? []), ...(container.args ?? [])].join(' ');
      if (/\bseed\.js\b/.test(commandLine)) problems.push(`${where}: seeds demo data (${commandLine})`);
      settings(where, Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value])));
    }
  }
  return problems;
}
