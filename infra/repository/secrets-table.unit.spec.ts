import { describe, expect, it } from 'vitest';
import { SERVICE_NAMES } from '@idem/shop';
import { parseAllDocuments } from 'yaml';
import { generateManifests, secretVariablesOf } from '../../deploy/kubernetes/generate.js';
import { loadCompose, read } from './compose-file.js';

interface Container {
  name: string;
  env?: { name: string; valueFrom?: { secretKeyRef?: object } }[];
}

/** docs/operations.md's "Who holds which secret", row by row (both tables): the process and its three columns. */
function secretsTable() {
  const section = read('docs/operations.md').split('## Who holds which secret')[1]!.split('\n## ')[0]!;
  const rows = section.split('\n').filter((line) => /^\| `/.test(line));
  const variables = (cell: string) =>
    cell
      .replace(/\([^)]*\)/g, '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => name && name !== '—')
      .flatMap((name) =>
        name.includes('\\<SERVICE\\>')
          ? SERVICE_NAMES.map((service) => name.replace('\\<SERVICE\\>', service.toUpperCase()))
          : [name],
      )
      .sort();
  return rows.map((row) => {
    const [process = '', compose = '', kubernetes = '', user = ''] = row.split('|').slice(1, -1);
    return {
      process: /`([^`]+)`/.exec(process)![1]!,
      compose: variables(compose),
      kubernetes: variables(kubernetes),
      user: /`([^`]+)`/.exec(user)![1]!,
    };
  });
}

describe('docs/operations.md, "Who holds which secret"', () => {
  const table = secretsTable();
  const { services, environments } = loadCompose();

  /** The script watcher beside Redis in Kubernetes: a container of Redis's pod, not a Deployment. */
  const redisPod = parseAllDocuments(generateManifests()['base/redis.yaml']!)
    .map((document) => document.toJS() as { kind: string; spec?: { template?: { spec: { containers: Container[] } } } })
    .find((object) => object.kind === 'StatefulSet')!.spec!.template!.spec;

  it('has a row for every service process, the console and the script watcher, each API and worker of compose', () => {
    const expected = [
      ...SERVICE_NAMES.flatMap((service) => [`${service}-api`, service]),
      'console',
      'redis-script-watcher',
    ];
    expect(table.map((row) => row.process).sort()).toEqual(expected.sort());
  });

  it("is what docker-compose.yml gives each container: its secret files and its REDIS_URL's user", () => {
    for (const row of table) {
      const files = Object.keys(services[row.process]?.environment ?? {})
        .filter((name) => name.endsWith('_FILE'))
        .map((name) => name.slice(0, -'_FILE'.length))
        .sort();
      expect({ process: row.process, secrets: files }).toEqual({ process: row.process, secrets: row.compose });
      // The watcher's redis-cli is given its user by name; every other process, in its REDIS_URL.
      const { REDIS_URL, REDIS_USER } = environments[row.process]!;
      const redisUser = REDIS_URL ? decodeURIComponent(new URL(REDIS_URL).username) : REDIS_USER;
      expect({ process: row.process, redisUser }).toEqual({ process: row.process, redisUser: row.user });
    }
  });

  it('is what the Kubernetes manifests give each Deployment and the watcher beside Redis (the console is not deployed)', () => {
    for (const row of table) {
      const [service, component] = row.process.endsWith('-api')
        ? [row.process.slice(0, -'-api'.length), 'api' as const]
        : [row.process, 'worker' as const];
      const deployed = SERVICE_NAMES.find((name) => name === service);
      const watcher = redisPod.containers.find((container) => container.name === 'script-watcher')!;
      const variables = deployed
        ? secretVariablesOf(deployed, component).map((v) => v.variable)
        : row.process === 'redis-script-watcher'
          ? (watcher.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name)
          : [];
      expect({ process: row.process, secrets: variables.sort() }).toEqual({
        process: row.process,
        secrets: row.kubernetes,
      });
    }
  });
});
