import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import { HttpError } from './errors.js';

/** An operator: a name for the audit trail, and the token that proves it. */
export interface Operator {
  readonly name: string;
  readonly token: string;
}

/**
 * The operators of a process: `ADMIN_TOKENS=name:token,…` (each token at least 16 characters),
 * and `ADMIN_TOKEN`, one token named `operator`. None: operator endpoints are disabled.
 */
export function operatorsFromEnv({
  ADMIN_TOKEN,
  ADMIN_TOKENS,
}: {
  ADMIN_TOKEN?: string | undefined;
  ADMIN_TOKENS?: string | undefined;
}): Operator[] {
  return [...namedOperators(ADMIN_TOKENS ?? ''), ...(ADMIN_TOKEN ? [{ name: 'operator', token: ADMIN_TOKEN }] : [])];
}

/** `name:token,…` as written (the token may hold colons: the name ends at the first). */
const namedOperators = (value: string): Operator[] =>
  value
    .split(',')
    .map((pair) => pair.trim())
    .filter(Boolean)
    .map((pair) => ({ name: pair.slice(0, Math.max(0, pair.indexOf(':'))), token: pair.slice(pair.indexOf(':') + 1) }));

/** Why ADMIN_TOKENS cannot be used as written, or undefined (for a configuration schema). */
export function operatorTokensProblem(value: string): string | undefined {
  const seen = new Set<string>();
  for (const { name, token } of namedOperators(value)) {
    if (!/^[\w.-]{1,64}$/.test(name)) return 'write name:token pairs, a name of letters, digits, ".", "-", "_"';
    if (token.length < 16) return `the token of ${name} is shorter than 16 characters`;
    if (seen.has(name)) return `${name} is named twice`;
    seen.add(name);
  }
  return undefined;
}

/**
 * Which operator a presented token belongs to, compared in constant time against every token
 * (as digests, so their lengths leak nothing either); undefined when none configured.
 */
export function operatorMatcher(
  operators: readonly Operator[],
): ((presented: string) => string | undefined) | undefined {
  if (operators.length === 0) return undefined;
  const digests = operators.map(({ name, token }) => ({ name, digest: digest(token) }));
  return (presented) => {
    const offered = digest(presented);
    let found: string | undefined;
    // Every comparison runs, whichever matches: the time says nothing about which.
    for (const { name, digest: expected } of digests) if (timingSafeEqual(offered, expected)) found ??= name;
    return found;
  };
}

/** The credentials of `Authorization: <scheme> <credentials>` when the scheme is Bearer, in any case (RFC 7235). */
export const bearerOf = (authorization: string | undefined): string | undefined =>
  /^bearer +(\S+)$/i.exec(authorization ?? '')?.[1];

/**
 * Guards operator endpoints with `Authorization: Bearer <token>` of a configured operator and
 * keeps the operator's name for the audit trail (`operatorOf`). Without operators they are
 * disabled (403). A wrong token counts as a failed authentication (`limitFailedAuthentications`);
 * a missing one is a plain 401 that counts against nobody.
 */
export function requireOperator(operators: readonly Operator[]): RequestHandler {
  const match = operatorMatcher(operators);
  return async (req, res, next) => {
    if (!match) throw new HttpError('admin_disabled', 'set ADMIN_TOKEN or ADMIN_TOKENS to enable operator endpoints');
    const bearer = bearerOf(req.get('authorization'));
    if (!bearer) throw new HttpError('unauthorized', 'send Authorization: Bearer <operator token>');
    const name = match(bearer);
    if (!name) {
      await failedToAuthenticate(res);
      throw new HttpError('forbidden', 'the operator token is not valid');
    }
    res.locals.operator = name;
    next();
  };
}

/** What `limitFailedAuthentications` gives the routes that check credentials, to report each failure before it answers. */
export interface FailureCount {
  /**
   * Counts a failed authentication against the request's address, and against `claimed`, the
   * customer a forged token names (atomically, in Redis); throws the 429 when either is past its limit.
   */
  failed(claimed?: string): Promise<void>;
}

const countOf = (res: Response) => (res.locals as { failureCount?: FailureCount }).failureCount;

/**
 * Reports a request refused for its credentials to the app's limit on failed authentications
 * (`limitFailedAuthentications`), before the refusal is answered: past the limit, the answer is 429.
 * A request with no credentials is not reported: it costs its sender a 401 and nobody anything.
 */
export async function failedToAuthenticate(res: Response, claimed?: string): Promise<void> {
  await countOf(res)?.failed(claimed);
}

/** The operator `requireOperator` (or `authenticate`) let through, if the caller is one. */
export const operatorOf = (res: Response): string | undefined => (res.locals as { operator?: string }).operator;

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
