import { customerTokensFromEnv, mintCustomerToken } from '@idem/http';

/**
 * The native run's key for customer tokens when JWT_SECRET is unset. It is public, so it only
 * suits a system on 127.0.0.1 (the native run binds nothing else); compose requires a secret
 * of its own, written by infra/compose-env.sh.
 */
export const DEVELOPMENT_JWT_SECRET = 'idem-native-run-development-key-not-a-secret';

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
