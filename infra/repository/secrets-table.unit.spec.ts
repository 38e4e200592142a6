import { describe, expect, it } from 'vitest';
import { SERVICE_NAMES } from '@idem/shop';
import { secretVariablesOf } from '../../deploy/kubernetes/generate.js';
import { loadCompose, read } from './compose-file.js';

/** docs/operations.md's "Who holds which secret", row by row: the process and its three columns. */
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

  it('has a row for every service process and the console, each API and worker of compose', () => {
    const expected = [...SERVICE_NAMES.flatMap((service) => [`${service}-api`, service]), 'console'];
    expect(table.map((row) => row.process).sort()).toEqual(expected.sort());
  });

  it("is what docker-compose.yml gives each container: its secret files and its REDIS_URL's user", () => {
    for (const row of table) {
      const files = Object.keys(services[row.process]?.environment ?? {})
        .filter((name) => name.endsWith('_FILE'))
        .map((name) => name.slice(0, -'_FILE'.length))
        .sort();
      expect({ process: row.process, secrets: files }).toEqual({ process: row.process, secrets: row.compose });
      const redisUser = decodeURIComponent(new URL(environments[row.process]!.REDIS_URL!).username);
      expect({ process: row.process, redisUser }).toEqual({ process: row.process, redisUser: row.user });
    }
  });

  it('is what the Kubernetes manifests give each Deployment (the console is not deployed)', () => {
    for (const row of table) {
      const [service, component] = row.process.endsWith('-api')
        ? [row.process.slice(0, -'-api'.length), 'api' as const]
        : [row.process, 'worker' as const];
      const deployed = SERVICE_NAMES.find((name) => name === service);
      const variables = deployed ? secretVariablesOf(deployed, component).map((v) => v.variable) : [];
      expect({ process: row.process, secrets: variables.sort() }).toEqual({
        process: row.process,
        secrets: row.kubernetes,
      });
    }
  });
});
