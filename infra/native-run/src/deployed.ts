import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pnpm } from '@idem/testkit';
import { SERVICE_NAMES, type ServiceName } from '@idem/shop';

/**
 * Services as their images carry and start them (infra/Dockerfile), natively: a service's bundles
 * built, `pnpm deploy`ed with its production dependencies only, pruned to what the bundles import,
 * its sources deleted; then started with the image's command and environment. A system started
 * from these runs what `docker compose up` runs, without tsx's loader or source-mapped stack traces.
 */

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dockerfile = () => readFileSync(join(root, 'infra/Dockerfile'), 'utf8');

/** infra/Dockerfile's command for the `service` target: the instrumentation entry first, then the service. */
export const SERVICE_IMAGE_COMMAND = JSON.parse(
  /FROM runtime AS service[\s\S]*?\nCMD (\[.*\])/.exec(dockerfile())![1]!,
) as string[];

/** What infra/Dockerfile's runtime stage sets for every process of an image, that a native process must too. */
export const IMAGE_ENV = { NODE_ENV: /\nENV NODE_ENV=(\S+)/.exec(dockerfile())![1]! };

/** A package with its production dependencies in `dir`, as infra/Dockerfile's deploy stages make it. */
export function deployPackage(pkg: string, dir: string): void {
  pnpm(root, [
    '--filter',
    pkg,
    'deploy',
    '--prod',
    '--legacy',
    '--config.node-linker=hoisted',
    '--ignore-scripts',
    dir,
  ]);
}

/** …pruned to what the bundles `entries` import (scripts/prune-deploy.ts), as infra/Dockerfile does next. */
export function pruneDeploy(dir: string, entries: string, ...dists: string[]): void {
  execFileSync(process.execPath, ['--import', 'tsx', 'scripts/prune-deploy.ts', dir, entries, ...dists], {
    cwd: root,
    stdio: 'pipe',
  });
}

/** `service`'s bundles (scripts/build.ts), in its package's dist/. */
export function buildService(service: ServiceName): void {
  execFileSync(
    process.execPath,
    ['--import', 'tsx', '--conditions=development', 'scripts/build.ts', `services/${service}`],
    {
      cwd: root,
      stdio: 'pipe',
    },
  );
}

/** `service` built and deployed into `dir` as its image holds it: dist/ and prisma/, no sources. */
export function deployService(service: ServiceName, dir: string): void {
  buildService(service);
  deployPackage(`@idem/${service}`, dir);
  pruneDeploy(dir, 'main,instrumentation');
  rmSync(join(dir, 'src'), { recursive: true, force: true });
}

/** Each service's deploy directory, for `SystemOptions.deployed`. */
export interface DeployedServices {
  readonly dirs: Readonly<Record<ServiceName, string>>;
  /** Deletes the deploys. */
  remove(): void;
}

/** Every service deployed (see {@link deployService}) into a temporary directory of its own. */
export function deployServices(): DeployedServices {
  const dirs = {} as Record<ServiceName, string>;
  const remove = () => Object.values(dirs).forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  try {
    for (const service of SERVICE_NAMES) {
      dirs[service] = mkdtempSync(join(tmpdir(), `idem-deploy-${service}-`));
      deployService(service, dirs[service]);
    }
  } catch (error) {
    remove();
    throw error;
  }
  return { dirs, remove };
}
