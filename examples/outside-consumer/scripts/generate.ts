// Writes the inbox's Prisma models beside schema.prisma, then generates the client from the
// folder. Run it after installing or upgrading @idem/inbox.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { packageModels } from '@idem/database';
import { inboxTables } from '@idem/inbox';

writeFileSync('prisma/idem-packages.prisma', packageModels([inboxTables]));
execFileSync('prisma', ['generate'], { stdio: 'inherit', shell: true });
