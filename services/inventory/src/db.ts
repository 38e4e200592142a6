import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient, type Prisma } from './generated/prisma/client.js';

export { PrismaClient };
/** The transaction client handlers receive from the inbox. */
export type Tx = Prisma.TransactionClient;

export function connectDatabase(databaseUrl: string, poolMax?: number): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl, max: poolMax }) });
}
