import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pnpmAsync, runScript } from '@idem/testkit';
import type { ServiceName } from '@idem/shop';

/**
 * Services as their images carry and start them (infra/Dockerfile), natively: a service's bundles
 * built, `pnpm deploy`ed with its production dependencies only, pruned to what the bundles import,
 * its sources deleted; then started with the image's command and environment. A system started
 * from these runs what `docker compose up` runs, without tsx's loader or source-mapped stack traces.
 * What infra/Dockerfile says that a native run or a test must follow is read here, once.
 */

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dockerfile = readFileSync(join(root, 'infra/Dockerfile'), 'utf8');

/** infra/Dockerfile's command for the `service` target: the instrumentation entry first, then the service. */
export const SERVICE_IMAGE_COMMAND = JSON.parse(
  /FROM runtime AS service[\s\S]*?\nCMD (\[.*\])/.exec(dockerfile)![1]!,
) as string[];

/** The bundle an argument of a command names (`dist/….js`, relative to the package), if it names one. */
export const bundleNamedBy = (arg: string) =>
  /^(\.\/)?dist\/.*\.js$/.test(arg) ? arg.replace(/^\.\//, '') : undefined;

/** The bundles a command starts (`dist/….js`), relative to the package. */
export const bundlesStartedBy = (command: readonly string[]) =>
  command.map(bundleNamedBy).filter((bundle): bundle is string => bundle !== undefined);

/** What infra/Dockerfile's runtime stage sets for every process of an image, that a native process must too. */
export const IMAGE_ENV = { NODE_ENV: /\nENV NODE_ENV=(\S+)/.exec(dockerfile)![1]! };

/** The services whose migrations infra/Dockerfile's migrate image carries (its `for service in …` loop). */
export const MIGRATE_IMAGE_SERVICES = /for service in ([\w ]+); do/.exec(dockerfile)![1]!.split(' ') as ServiceName[];

/** A package with its production dependencies in `dir`, as infra/Dockerfile's deploy stages make it. */
export async function deployPackage(pkg: string, dir: string): Promise<void> {
  await pnpmAsync(root, [
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
export async function pruneDeploy(dir: string, entries: string, ...dists: string[]): Promise<void> {
  await runScript(root, 'scripts/prune-deploy.ts', [dir, entries, ...dists]);
}

/** `service`'s bundles (scripts/build.ts), in its package's dist/. */
export async function buildService(service: ServiceName): Promise<void> {
  await runScript(root, 'scripts/build.ts', [`services/${service}`], ['--conditions=development']);
}

/** `service` built and deployed into `dir` as its image holds it: dist/ and prisma/, no sources. */
export async function deployService(service: ServiceName, dir: string): Promise<void> {
  await buildService(service);
  await deployPackage(`@idem/${service}`, dir);
  await pruneDeploy(dir, 'main,instrumentation');
  rmSync(join(dir, 'src'), { recursive: true, force: true });
}

/** Each service's deploy directory, for `SystemOptions.deployed`. */
export interface DeployedServices<S extends ServiceName = ServiceName> {
  readonly dirs: Readonly<Record<S, string>>;
  /** Deletes the deploys. */
  remove(): void;
}

/** `services` deployed (see {@link deployService}) into a temporary directory each, side by side. */
export async function deployServices<S extends ServiceName>(services: readonly S[]): Promise<DeployedServices<S>> {
  const dirs = Object.fromEntries(
    services.map((service) => [service, mkdtempSync(join(tmpdir(), `idem-deploy-${service}-`))]),
  ) as Record<S, string>;
  const remove = () => Object.values<string>(dirs).forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  // Every deploy finishes before a failed one's directories are deleted under the others.
  const failed = (await Promise.allSettled(services.map((service) => deployService(service, dirs[service])))).find(
    (outcome) => outcome.status === 'rejected',
  );
  if (failed) {
    remove();
    throw failed.reason;
  }
  return { dirs, remove };
}
