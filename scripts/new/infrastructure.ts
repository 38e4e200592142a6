/**
 * A new service's entries in every file that lists services (infra/repository/service-registry.unit.spec.ts
 * holds each against the registry). Each entry is inserted after the last service's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICE_NAMES, SERVICE_REGISTRY } from '@idem/shop';
import { insert, replace, root } from './edit.js';

export function addToInfrastructure(name: string, port: number): void {
  const NAME = name.toUpperCase();
  const last = SERVICE_NAMES.at(-1)!;
  const LAST = last.toUpperCase();
  const hostPort = freeHostPort(10_000 + port);

  // Lists in shell loops and SQL.
  const loop = /(for (?:service|s) in [\w ]+)(; do)/g;
  replace('infra/Dockerfile', loop, (_, list: string, tail: string) => `${list} ${name}${tail}`);
  replace('infra/postgres/init.sh', loop, (_, list: string, tail: string) => `${list} ${name}${tail}`);
  replace(
    'infra/compose-secrets.sh',
    /^(services='[\w ]+)(')$/m,
    (_, list: string, tail: string) => `${list} ${name}${tail}`,
  );
  replace(
    'infra/postgres/init.sh',
    /(GRANT CONNECT ON DATABASE [\w, ]+)( TO console)/,
    (_, list: string, tail: string) => `${list}, ${name}${tail}`,
  );

  insert(
    'infra/prometheus/prometheus.yml',
    'after',
    new RegExp(`^ {8}port: ${SERVICE_REGISTRY[last].port}$`),
    `  - job_name: ${name}
    dns_sd_configs:
      - names: [${name}, ${name}-api]
        type: A
        port: ${port}`,
  );

  const env = '.env.example';
  insert(env, 'after', `${LAST}_HOST_PORT=`, `${NAME}_HOST_PORT=${hostPort}`);

  const compose = 'docker-compose.yml';
  insert(
    compose,
    'after',
    `${LAST}_DATABASE_URL_FILE: /run/idem-secrets/${last}-owner-database-url`,
    `      ${NAME}_DATABASE_URL_FILE: /run/idem-secrets/${name}-owner-database-url`,
  );
  insert(
    compose,
    'after',
    `${LAST}_DATABASE_URL_FILE: /run/idem-secrets/console-${last}-database-url`,
    `      ${NAME}_DATABASE_URL_FILE: /run/idem-secrets/console-${name}-database-url`,
  );
  insert(
    compose,
    'after',
    `${LAST}_FAULTS_TOKEN_FILE: /run/idem-secrets/${last}-faults-token`,
    `      ${NAME}_FAULTS_TOKEN_FILE: /run/idem-secrets/${name}-faults-token`,
  );
  replace(
    compose,
    /(CONSOLE_PROCESSES: .*)$/m,
    (_, list: string) => `${list},${name}-api=http://${name}-api:${port},${name}=http://${name}:${port}`,
  );
  insert(
    compose,
    'before',
    'x-healthcheck: &healthcheck',
    `x-${name}-env: &${name}-env
  <<: *service-env
  OTEL_SERVICE_NAME: ${name}
  DATABASE_URL_FILE: /run/idem-secrets/${name}-database-url
  REDIS_URL_FILE: /run/idem-secrets/${name}-redis-url
  PORT: '${port}'
`,
  );
  insert(
    compose,
    'after',
    `- secrets-${last}:/run/idem-shared/${last}`,
    `      - secrets-${name}-api:/run/idem-shared/${name}-api
      - secrets-${name}:/run/idem-shared/${name}`,
  );
  insert(compose, 'after', new RegExp(`^  secrets-${last}:$`), `  secrets-${name}-api:\n  secrets-${name}:`);
  insert(
    compose,
    'before',
    '# The teaching console: every delivery',
    `  ${name}-api:
    build: { <<: *build, args: { PACKAGE: '@idem/${name}' } }
    depends_on: *depends
    volumes: [secrets-${name}-api:/run/idem-secrets:ro]
    environment:
      <<: *${name}-env
      ADMIN_TOKEN_FILE: /run/idem-secrets/${name}-admin-token
      FAULTS_TOKEN_FILE: /run/idem-secrets/${name}-faults-token
      IDEM_ROLES: http
    ports:
      - '127.0.0.1:\${${NAME}_HOST_PORT:-${hostPort}}:${port}'
    healthcheck: *healthcheck
    <<: *idem

  ${name}:
    build: { <<: *build, args: { PACKAGE: '@idem/${name}' } }
    depends_on:
      <<: *depends
      ${name}-api:
        condition: service_started
    volumes: [secrets-${name}:/run/idem-secrets:ro]
    environment:
      <<: *${name}-env
      IDEM_ROLES: consumers,relay,workers
      FAULTS_TOKEN_FILE: /run/idem-secrets/${name}-faults-token
    healthcheck: *healthcheck
    <<: *idem
`,
  );

  // Kubernetes: the base is generated from the registry (pnpm k8s:generate); the overlays name
  // each service's database and image.
  const dev = 'deploy/kubernetes/overlays/dev';
  insert(
    `${dev}/kustomization.yaml`,
    'after',
    `- url=postgresql://${last}:dev-${last}-password@`,
    `  - name: ${name}-database
    type: kubernetes.io/basic-auth
    literals:
      - username=${name}
      - password=dev-${name}-password
      - url=postgresql://${name}:dev-${name}-password@idem-postgres-rw:5432/${name}`,
  );
  insert(
    `${dev}/kustomization.yaml`,
    'after',
    `- ${last}=dev-${last}-redis-password`,
    `      - ${name}=dev-${name}-redis-password`,
  );
  insert(
    `${dev}/kustomization.yaml`,
    'after',
    `- url=redis://idem-${last}:dev-${last}-redis-password@redis:6379`,
    `  - name: ${name}-redis
    literals:
      - url=redis://idem-${name}:dev-${name}-redis-password@redis:6379`,
  );
  insert(
    `${dev}/kustomization.yaml`,
    'after',
    `- token=dev-${last}-operator-token-0123456789`,
    `  - name: ${name}-admin
    literals:
      - token=dev-${name}-operator-token-0123456789`,
  );
  insert(
    `${dev}/postgres.yaml`,
    'after',
    `passwordSecret: { name: ${last}-database }`,
    `      - name: ${name}
        ensure: present
        login: true
        passwordSecret: { name: ${name}-database }`,
  );
  insert(
    `${dev}/postgres.yaml`,
    'after',
    `  owner: ${last}`,
    `---
apiVersion: postgresql.cnpg.io/v1
kind: Database
metadata:
  name: ${name}
spec:
  cluster: { name: idem-postgres }
  name: ${name}
  owner: ${name}`,
  );
  insert(
    `${dev}/kustomization.yaml`,
    'after',
    `{ name: idem/${last}, `,
    `  - { name: idem/${name}, newName: localhost:5001/idem/${name}, newTag: dev }`,
  );
  const production = 'deploy/kubernetes/overlays/production';
  insert(
    `${production}/kustomization.yaml`,
    'after',
    `{ name: idem/${last}, `,
    `  - { name: idem/${name}, newName: registry.example.com/idem/${name}, newTag: '0.1.0' }`,
  );
  replace(
    `${production}/database-egress.yaml`,
    /(operator: In, values: \[[\w, ]+)\]/,
    (_, list: string) => `${list}, ${name}]`,
  );
}

/** 10000 + the service's port, or the next hundred up that .env.example does not use yet. */
function freeHostPort(preferred: number): number {
  const used = new Set(
    [...readFileSync(join(root, '.env.example'), 'utf8').matchAll(/_HOST_PORT=(\d+)/g)].map((m) => Number(m[1])),
  );
  let port = preferred;
  while (used.has(port)) port += 100;
  return port;
}
