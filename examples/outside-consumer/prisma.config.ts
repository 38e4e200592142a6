import { defineConfig } from 'prisma/config';

export default defineConfig({
  // The folder: schema.prisma and the inbox's models that `npm run generate` writes beside it.
  schema: 'prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/outside' },
});
