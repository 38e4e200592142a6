import { preparingStatements, runningAfterCommit } from '@idem/database';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient, type Prisma } from './generated/prisma/client.js';

export { PrismaClient };
/** The transaction client handlers receive from the inbox. */
export type Tx = Prisma.TransactionClient;

/**
 * The service's client: its statements prepared on each connection (@idem/database
 * prepared-statements.ts), and what a transaction leaves to do after its commit done right then
 * (the outbox's handoff).
 */
export function connectDatabase(databaseUrl: string, poolMax?: number): PrismaClient {
  return runningAfterCommit(
    new PrismaClient({
      adapter: new PrismaPg({ connectionString: databaseUrl, max: poolMax }, preparingStatements()),
    }),
  );
}
