// Applies the notifications service's migrations to DATABASE_URL (creating the database if needed), as the
// role that owns it; DATABASE_RUNTIME_ROLE, when set, is the role the service runs as.
// The native run and the docker compose `migrate` service both run this entrypoint.
import { fileURLToPath } from 'node:url';
import { migrate } from '@idem/database';
import { PACKAGE_TABLES } from './tables.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/notifications';
const migrationsDir = fileURLToPath(new URL('../prisma/migrations', import.meta.url));

const applied = await migrate({
  databaseUrl,
  migrationsDir,
  include: PACKAGE_TABLES,
  // The role the service runs as: data, never schema (docs/operations.md, "Database roles").
  runtimeRole: process.env.DATABASE_RUNTIME_ROLE || undefined,
  log: (line) => console.log(`notifications: ${line}`),
});
console.log(`notifications: database up to date (${applied.length} migration(s) applied)`);
