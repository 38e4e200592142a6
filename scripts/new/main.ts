/**
 * The scaffold (docs/extending.md):
 *   pnpm new service <name>                 a service with the anatomy every idem service has
 *   pnpm new consumer <service> <contract>  a consumer of <contract> in <service>
 * It writes files and updates the lists that name services; it never overwrites a file. Its
 * changes are formatted with Prettier, as `pnpm lint` expects.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { newConsumer } from './consumer.js';
import { root, ScaffoldError, touched } from './edit.js';
import { newService } from './service.js';

const usage = 'usage: pnpm new service <name> | pnpm new consumer <service> <contract>';
const [kind, ...args] = process.argv.slice(2);
try {
  if (kind === 'service' && args.length === 1) newService(args[0]!);
  else if (kind === 'consumer' && args.length === 2) newConsumer(args[0]!, args[1]!);
  else throw new ScaffoldError(usage);
  execFileSync(
    join(root, 'node_modules/.bin/prettier'),
    ['--write', '--log-level', 'warn', '--ignore-unknown', ...touched],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
} catch (error) {
  if (!(error instanceof ScaffoldError)) throw error;
  console.error(error.message);
  process.exit(1);
}
