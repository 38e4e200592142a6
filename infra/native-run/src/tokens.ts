import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { customerTokensFromEnv, DEVELOPMENT_JWT_SECRET, mintCustomerToken } from '@idem/http';
import { SERVICE_NAMES, type ServiceName } from '@idem/shop';

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

/**
 * The console's customer token: customer `console` (its receipts to student@example.com), minted
 * at every start by whoever starts the console — here `pnpm start`, in compose its secrets step —
 * and lasting 30 days, longer than any run of either. The console gets the token, never the key:
 * it can act as no other customer.
 */
export function consoleCustomerToken(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return mintCustomerToken(customerTokensOf(env), 'console', { email: 'student@example.com', expiresIn: '30d' });
}

/** `Authorization` for a request as this customer. */
export async function asCustomer(customerId: string): Promise<{ authorization: string }> {
  return { authorization: `Bearer ${await customerToken(customerId)}` };
}

/** `Authorization` for a request as the operator; nothing when no token is known. */
export function asOperator(adminToken: string | undefined): { authorization?: string } {
  return adminToken ? { authorization: `Bearer ${adminToken}` } : {};
}

/** Each API's operator token: one service's opens that service's operator endpoints and no other's. */
export type OperatorTokens = Partial<Record<ServiceName, string>>;

/** The variable that gives a service's operator token to `pnpm start` and the tools: ORDERS_ADMIN_TOKEN, … */
export const operatorTokenVariable = (service: ServiceName) => `${service.toUpperCase()}_ADMIN_TOKEN`;

/**
 * Where `pnpm start` keeps a token it generated for a system (readable by its owner only), so
 * `pnpm demo` in another terminal finds it, in the checkout: `.idem/<system>.<service>.admin-token`
 * for each API's, `.idem/<system>.admin-token` for the console's and the doubles' (their login
 * and API beyond loopback, the mail sink's API for the checker).
 */
export function operatorTokenFile(system: string | undefined, service?: ServiceName): string {
  const name = `${system ?? 'default'}${service ? `.${service}` : ''}.admin-token`;
  return fileURLToPath(new URL(`../../../.idem/${name}`, import.meta.url));
}

/**
 * The operator tokens for `pnpm start`: ADMIN_TOKEN (the console's and the doubles') and each
 * service's <SERVICE>_ADMIN_TOKEN when given, or fresh random ones (there is no default token:
 * anyone who read the README would have it), saved for `pnpm demo`. As variables for `startSystem`.
 */
export function operatorTokensFor(
  system: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const tokenOf = (variable: string, file: string) => {
    const given = env[variable];
    if (given) return given;
    const token = randomBytes(24).toString('base64url');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    chmodSync(file, 0o600);
    return token;
  };
  return {
    ADMIN_TOKEN: tokenOf('ADMIN_TOKEN', operatorTokenFile(system)),
    ...Object.fromEntries(
      SERVICE_NAMES.map((service) => [
        operatorTokenVariable(service),
        tokenOf(operatorTokenVariable(service), operatorTokenFile(system, service)),
      ]),
    ),
  };
}

/** ADMIN_TOKEN, or the one `pnpm start` generated for this system; undefined when neither exists. */
export function savedOperatorToken(
  system: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  return env.ADMIN_TOKEN || readToken(operatorTokenFile(system));
}

/** Each API's operator token: <SERVICE>_ADMIN_TOKEN, or the one `pnpm start` generated for this system. */
export function savedOperatorTokens(system: string | undefined, env: NodeJS.ProcessEnv = process.env): OperatorTokens {
  return Object.fromEntries(
    SERVICE_NAMES.flatMap((service) => {
      const token = env[operatorTokenVariable(service)] || readToken(operatorTokenFile(system, service));
      return token ? [[service, token]] : [];
    }),
  );
}

const readToken = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim() || undefined : undefined);
