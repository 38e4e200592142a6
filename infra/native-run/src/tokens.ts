import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { customerTokensFromEnv, DEVELOPMENT_JWT_SECRET, mintCustomerToken } from '@idem/http';

export { DEVELOPMENT_JWT_SECRET };

/** The key, issuer and audience a system's orders API checks customer tokens against. */
export function customerTokensOf(env: NodeJS.ProcessEnv = process.env) {
  return { ...customerTokensFromEnv(env), secret: env.JWT_SECRET || DEVELOPMENT_JWT_SECRET };
}

/**
 * What an identity provider would hand a signed-in customer: the demo's, bench's, chaos run's
 * and console's credentials. Its verified `email` claim is where the customer's receipts go
 * (`<customer>@example.com` unless told otherwise: the SMTP sink keeps every one).
 */
export function customerToken(
  customerId: string,
  { email = `${customerId}@example.com`, env = process.env }: { email?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  return mintCustomerToken(customerTokensOf(env), customerId, { email });
}

/** `Authorization` for a request as this customer. */
export async function asCustomer(customerId: string): Promise<{ authorization: string }> {
  return { authorization: `Bearer ${await customerToken(customerId)}` };
}

/** `Authorization` for a request as the operator; nothing when no token is known. */
export function asOperator(adminToken: string | undefined): { authorization?: string } {
  return adminToken ? { authorization: `Bearer ${adminToken}` } : {};
}

/**
 * Where `pnpm start` keeps the operator token it generated for a system (readable by its owner
 * only), so `pnpm demo` in another terminal finds it: `.idem/<system>.admin-token` in the checkout.
 */
export function operatorTokenFile(system: string | undefined): string {
  return fileURLToPath(new URL(`../../../.idem/${system ?? 'default'}.admin-token`, import.meta.url));
}

/**
 * The operator token for `pnpm start`: ADMIN_TOKEN when given, or a fresh random one (there is
 * no default token: anyone who read the README would have it), saved for `pnpm demo`.
 */
export function operatorTokenFor(system: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (env.ADMIN_TOKEN) return env.ADMIN_TOKEN;
  const token = randomBytes(24).toString('base64url');
  const file = operatorTokenFile(system);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
}

/** ADMIN_TOKEN, or the one `pnpm start` generated for this system; undefined when neither exists. */
export function savedOperatorToken(
  system: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  if (env.ADMIN_TOKEN) return env.ADMIN_TOKEN;
  const file = operatorTokenFile(system);
  return existsSync(file) ? readFileSync(file, 'utf8').trim() || undefined : undefined;
}
