import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const run = promisify(execFile);

/** Each node's cluster bus listens this far above its port (by default 10000: Linux's ephemeral range). */
const BUS_PORT_OFFSET = 500;

export interface RedisClusterNode {
  readonly port: number;
  /** The node's redis-server; a new one after {@link RedisCluster.restart}. */
  process: ChildProcess;
}

export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:<port>,…`: every node, as @idem/messaging's cluster URL. */
  readonly url: string;
  readonly nodes: readonly RedisClusterNode[];
  /** The node that is master of `key`'s slot now, and a replica of it. */
  roleOf(key: string): Promise<{ master: RedisClusterNode; replica: RedisClusterNode | undefined }>;
  /**
   * How many keys matching `pattern` each master that serves slots holds, by port. A master whose
   * slots a replica took over (it was silent past the node timeout on a loaded machine) is left
   * out until it rejoins as a replica.
   */
  keysPerMaster(pattern: string): Promise<Record<number, number>>;
  /** Kills a node at once (SIGKILL), as a crash would. */
  kill(node: RedisClusterNode): Promise<void>;
  /**
   * Starts a killed node again: it rejoins from its nodes.conf — as a replica once its master was
   * replaced — and resolves once it is in sync.
   */
  restart(node: RedisClusterNode): Promise<void>;
  /** Stops every node and deletes their directory. */
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of the test's own, from the machine's `redis-server` and `redis-cli`, on
 * loopback ports from `firstPort` (their bus 500 above): `masters` masters, each with `replicas`
 * replicas, in sync before this resolves. `nodeTimeoutMs` is how long a master may be silent
 * before its replica takes over (cluster-node-timeout). Logs and nodes.conf stay in a temporary
 * directory until stop().
 */
export async function startRedisCluster({
  firstPort,
  masters = 3,
  replicas = 1,
  nodeTimeoutMs = 2_000,
}: {
  firstPort: number;
  masters?: number;
  replicas?: number;
  nodeTimeoutMs?: number;
}): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'idem-redis-cluster-'));
  const ports = Array.from({ length: masters * (1 + replicas) }, (_, i) => firstPort + i);
  const serve = (port: number) => serveNode(dir, port, nodeTimeoutMs);
  const nodes: RedisClusterNode[] = ports.map((port) => ({ port, process: serve(port) }));
  const stop = async () => {
    await Promise.all(nodes.map(killNode));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await formCluster(ports, replicas);
  } catch (error) {
    await stop(); // a cluster that did not come up leaves no node behind
    throw error;
  }
  const byPort = new Map(nodes.map((node) => [node.port, node]));
  return {
    url: `redis+cluster://${ports.map((port) => `127.0.0.1:${port}`).join(',')}`,
    nodes,
    async roleOf(key) {
      const slot = Number(await anyNode(ports, (r) => r.cluster('KEYSLOT', key)));
      const view = await topologyOf(ports);
      const master = view.find((n) => n.master && n.slots.some(([a, b = a]) => slot >= a && slot <= b));
      if (!master) throw new Error(`no master holds slot ${slot}`);
      const replica = view.find((n) => n.live && n.of === master.port);
      return { master: byPort.get(master.port)!, replica: replica && byPort.get(replica.port) };
    },
    async keysPerMaster(pattern) {
      const counts: Record<number, number> = {};
      for (const { port } of (await topologyOf(ports)).filter((n) => n.master && n.slots.length > 0)) {
        counts[port] = (await ask(port, (r) => r.keys(pattern))).length;
      }
      return counts;
    },
    kill: killNode,
    restart: (node) => restartNode(node, ports, serve),
    stop,
  };
}

/**
 * Starts a killed node again. Back, it is known for what it is by every node that answers, so
 * roleOf() finds it from any of them: a master serving slots, or a replica. A master that failed
 * over boots as the master it was, and is one with no slots until it learns it was replaced and
 * follows the new master: not back yet.
 */
async function restartNode(node: RedisClusterNode, ports: readonly number[], serve: (port: number) => ChildProcess) {
  node.process = serve(node.port);
  await until(`every node to see ${node.port} back`, async () => {
    const views = await Promise.all(ports.map((port) => viewOf(port).catch(() => undefined)));
    return views.every(
      (view) =>
        !view ||
        view.some((n) => n.port === node.port && n.live && ((n.master && n.slots.length > 0) || n.of !== undefined)),
    );
  });
  // As a replica, it can stand in for its master only once it is in sync.
  await until(`node ${node.port} in sync`, async () =>
    /role:master|master_link_status:up/.test(await ask(node.port, (r) => r.info('replication'))),
  );
}

function serveNode(dir: string, port: number, nodeTimeoutMs: number): ChildProcess {
  // Its users (ACL SETUSER, then ACL SAVE) are kept in a file of its own: a restarted node knows them.
  const acl = join(dir, `users-${port}.acl`);
  if (!existsSync(acl)) writeFileSync(acl, '');
  return spawn(
    'redis-server',
    [
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      ...['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`],
      ...['--cluster-node-timeout', String(nodeTimeoutMs), '--cluster-port', String(port + BUS_PORT_OFFSET)],
      ...['--logfile', `redis-${port}.log`, '--repl-diskless-sync-delay', '0'], // a replica syncs at once
      ...['--aclfile', acl],
    ],
    { stdio: 'ignore' },
  );
}

/** The nodes listening, then `redis-cli --cluster create`, then every slot served and every replica in sync. */
async function formCluster(ports: readonly number[], replicas: number): Promise<void> {
  await until('the nodes to listen', async () =>
    (await Promise.all(ports.map((port) => ask(port, (r) => r.ping())))).every((pong) => pong === 'PONG'),
  );
  const addresses = ports.map((port) => `127.0.0.1:${port}`);
  await run('redis-cli', [
    '--cluster',
    'create',
    ...addresses,
    '--cluster-replicas',
    String(replicas),
    '--cluster-yes',
  ]);
  await until('the cluster to be whole, its replicas in sync', async () => {
    const states = await Promise.all(ports.map((port) => ask(port, (r) => r.cluster('INFO') as Promise<string>)));
    if (!states.every((info) => /cluster_state:ok/.test(info))) return false;
    const replication = await Promise.all(ports.map((port) => ask(port, (r) => r.info('replication'))));
    const linked = replication.filter((info) => /master_link_status:up/.test(info)).length;
    return linked === (ports.length / (1 + replicas)) * replicas;
  });
}

async function killNode(node: RedisClusterNode): Promise<void> {
  node.process.kill('SIGCONT'); // a stopped node would not die until continued
  if (node.process.exitCode !== null || node.process.signalCode !== null) return;
  const gone = new Promise((resolve) => node.process.once('exit', resolve));
  node.process.kill('SIGKILL');
  await gone;
}

/** One question to one node, on a connection of its own. */
async function ask<T>(port: number, question: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => {});
  try {
    return await question(redis);
  } finally {
    redis.disconnect();
  }
}

/** The first node that answers (some may be killed). */
async function anyNode<T>(ports: readonly number[], question: (redis: Redis) => Promise<T>): Promise<T> {
  for (const port of ports) {
    const answer = await ask(port, question).then(
      (value) => ({ value }),
      () => undefined,
    );
    if (answer) return answer.value;
  }
  throw new Error('no node of the cluster answers');
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The cluster as the first node that answers sees it. */
function topologyOf(ports: readonly number[]) {
  return anyNode(ports, (r) => r.cluster('NODES') as Promise<string>).then(parseNodes);
}

/** The cluster as one node sees it. */
function viewOf(port: number) {
  return ask(port, (r) => r.cluster('NODES') as Promise<string>).then(parseNodes);
}

/** CLUSTER NODES: each node's port, whether it is live, a live master, whose replica it is, its slots. */
function parseNodes(text: string) {
  const lines = text
    .trim()
    .split('\n')
    .map((line) => line.split(' '));
  const portOf = (address: string) => Number(address.split(/[:@]/)[1]);
  const idToPort = new Map(lines.map(([id, address]) => [id!, portOf(address!)]));
  // Failed as the cluster agreed (`fail`), not as one node suspects on a loaded machine (`fail?`).
  const failed = (flags: string) => flags.split(',').includes('fail');
  return lines.map(([, address, flags, masterId, , , , , ...slots]) => ({
    port: portOf(address!),
    live: !failed(flags!),
    master: flags!.includes('master') && !failed(flags!),
    of: idToPort.get(masterId!),
    slots: slots.filter((s) => /^\d/.test(s)).map((s) => s.split('-').map(Number) as [number, number?]),
  }));
}
