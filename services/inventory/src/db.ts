import { handingOver } from '@idem/outbox';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient, type Prisma } from './generated/prisma/client.js';

export { PrismaClient };
/** The transaction client handlers receive from the inbox. */
export type Tx = Prisma.TransactionClient;

/** The service's client: a transaction's events go to the broker right after it commits (the outbox's handoff). */
export function connectDatabase(databaseUrl: string, poolMax?: number): PrismaClient {
  return handingOver(new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl, max: poolMax }) }));
}
