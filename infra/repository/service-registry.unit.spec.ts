/**
 * One registry of services (SERVICE_REGISTRY, @idem/contracts): the TypeScript that lists
 * services derives its list from it; every other file that lists them is checked against it
 * here, so adding or renaming a service cannot leave one of them behind.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_NAMES, SERVICE_REGISTRY } from '@idem/shop';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { root } from './compose-file.js';

type Read = (path: string) => string;
const readRepo: Read = (path) => readFileSync(join(root, path), 'utf8');
const sameList = (found: readonly string[] | undefined) =>
  JSON.stringify([...(found ?? [])].sort()) === JSON.stringify([...SERVICE_NAMES].sort());
const loops = (text: string) => [...text.matchAll(/for (?:service|s) in ([\w ]+); do/g)].map((m) => m[1]!.split(' '));

/** Where a list of services disagrees with the registry: `<file>: <what>` per disagreement. */
function disagreements(read: Read): string[] {
  const problems: string[] = [];
  const check = (where: string, ok: boolean, what: string) => void (ok || problems.push(`${where}: ${what}`));

  // A service is a folder with a package.json (pnpm deploy may leave scratch folders beside them).
  const services = readdirSync(join(root, 'services')).filter((name) =>
    existsSync(join(root, 'services', name, 'package.json')),
  );
  check('services/', sameList(services), 'a package per service');

  const dockerfile = loops(read('infra/Dockerfile'));
  check(
    'infra/Dockerfile',
    dockerfile.length === 2 && dockerfile.every(sameList),
    'the migrate stage and command loops',
  );
  const secrets = /^services='([\w ]+)'$/m.exec(read('infra/compose-secrets.sh'))?.[1]?.split(' ');
  check('infra/compose-secrets.sh', sameList(secrets), 'the database and Redis users each');
  const init = read('infra/postgres/init.sh');
  check('infra/postgres/init.sh', loops(init).length === 1 && loops(init).every(sameList), 'a role and database each');
  const granted = /GRANT CONNECT ON DATABASE ([\w, ]+) TO console/.exec(init)?.[1]?.split(', ');
  check('infra/postgres/init.sh', sameList(granted), "the console's CONNECT grant");

  const prometheus = parse(read('infra/prometheus/prometheus.yml')) as {
    scrape_configs: { job_name: string; dns_sd_configs: { names: string[]; port: number }[] }[];
  };
  check('infra/prometheus/prometheus.yml', sameList(prometheus.scrape_configs.map((c) => c.job_name)), 'a job each');
  for (const job of prometheus.scrape_configs) {
    const service = SERVICE_REGISTRY[job.job_name as keyof typeof SERVICE_REGISTRY];
    const [sd] = job.dns_sd_configs;
    check('infra/prometheus/prometheus.yml', sd?.port === service?.port, `${job.job_name} scraped on its port`);
    check(
      'infra/prometheus/prometheus.yml',
      sd?.names.join() === `${job.job_name},${job.job_name}-api`,
      `${job.job_name} and its API`,
    );
  }

  const compose = parse(read('docker-compose.yml')) as {
    services: Record<string, { environment?: Record<string, string> }>;
  };
  const idem = Object.keys(compose.services)
    .filter((name) => /-api$/.test(name))
    .map((name) => name.slice(0, -4));
  check('docker-compose.yml', sameList(idem), 'an <name>-api service each');
  for (const service of SERVICE_NAMES) {
    check('docker-compose.yml', service in compose.services, `a ${service} worker service`);
    const variable = `${service.toUpperCase()}_DATABASE_URL_FILE`;
    check('docker-compose.yml', Boolean(compose.services.migrate?.environment?.[variable]), `migrate gets ${variable}`);
    check('docker-compose.yml', Boolean(compose.services.console?.environment?.[variable]), `console gets ${variable}`);
    const processes = compose.services.console?.environment?.CONSOLE_PROCESSES ?? '';
    check(
      'docker-compose.yml',
      processes.includes(`${service}-api=`) && processes.includes(`,${service}=`),
      `console switches ${service}`,
    );
    const example = read('.env.example');
    check(
      '.env.example',
      example.includes(`\n${service.toUpperCase()}_HOST_PORT=`),
      `${service.toUpperCase()}_HOST_PORT`,
    );
  }
  const base = readdirSync(join(root, 'deploy/kubernetes/base')).filter((f) => f.endsWith('.yaml'));
  for (const service of SERVICE_NAMES)
    check('deploy/kubernetes/base', base.includes(`${service}.yaml`), `${service}.yaml`);
  return problems;
}

describe('the service registry', () => {
  it('agrees with every list of services outside TypeScript', () => {
    expect(disagreements(readRepo)).toEqual([]);
  });

  it('notices a list that left a service out', () => {
    const last = SERVICE_NAMES.at(-1)!;
    const withoutLast: Read = (path) =>
      path === 'infra/Dockerfile' || path === 'infra/prometheus/prometheus.yml'
        ? readRepo(path)
            .replaceAll(` ${last};`, ';')
            .replace(new RegExp(` {2}- job_name: ${last}[\\s\\S]*$`), '')
        : readRepo(path);
    expect(disagreements(withoutLast)).toEqual([
      'infra/Dockerfile: the migrate stage and command loops',
      'infra/prometheus/prometheus.yml: a job each',
    ]);
  });
});
