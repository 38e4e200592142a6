import { defineConfig } from 'prisma/config';

// For the Prisma CLI (generate, and migrate where its engine is available). The service itself
// reads DATABASE_URL in src/config.ts.
export default defineConfig({
  // The folder: schema.prisma and the package models `pnpm generate` writes beside it.
  schema: 'prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/inventory' },
});
