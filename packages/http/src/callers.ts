import type { Request, RequestHandler, Response } from 'express';
import { createRemoteJWKSet, decodeJwt, errors, jwtVerify, SignJWT, type JWTVerifyResult } from 'jose';
import { z } from 'zod';
import { bearerOf, failedToAuthenticate, operatorMatcher, type Operator } from './operators.js';
import { HttpError } from './errors.js';

/**
 * Who sent a request: a customer (the `sub` of a verified JWT, and its `email` claim when the
 * identity provider vouches for one), or an operator (ADMIN_TOKEN or ADMIN_TOKENS), by name.
 */
export type Caller =
  | { readonly kind: 'customer'; readonly customerId: string; readonly email?: string }
  | { readonly kind: 'operator'; readonly name: string };

export interface CustomerTokens {
  /** HS256 key shared with whoever issues customer tokens (`pnpm token` in development). */
  readonly secret?: string;
  /** Or an identity provider's key set (RS256, ES256, EdDSA), e.g. `https://issuer/.well-known/jwks.json`. */
  readonly jwksUrl?: string;
  readonly issuer: string;
  readonly audience: string;
  /**
   * Whether a token with an `email` but no `email_verified` claim is refused. Providers that
   * verify addresses say so in the claim (Auth0, Google, Keycloak, Cognito); set false only for one
   * that vouches for every address it issues and never sends the claim. A claim that is present
   * must be `true` whatever this says. @defaultValue true
   */
  readonly requireEmailVerified?: boolean;
}

/**
 * The native run's key for customer tokens when JWT_SECRET is unset. It is public (it is in this
 * repository), so anyone can sign a token with it: a service that binds anything but loopback
 * refuses it (the orders configuration), and compose and Kubernetes need a key of their own.
 */
export const DEVELOPMENT_JWT_SECRET = 'idem-native-run-development-key-not-a-secret';

/** Whether a bind address serves this machine only. */
export const isLoopbackAddress = (host: string): boolean =>
  host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);

/** The issuer and audience customer tokens carry unless JWT_ISSUER and JWT_AUDIENCE say otherwise. */
export const DEFAULT_TOKEN_CLAIMS = { issuer: 'idem', audience: 'idem-orders' } as const;

/** The key, issuer and audience of customer tokens from the environment (JWT_SECRET, JWT_ISSUER, JWT_AUDIENCE). */
export function customerTokensFromEnv(env: NodeJS.ProcessEnv) {
  return {
    ...(env.JWT_SECRET ? { secret: env.JWT_SECRET } : {}),
    issuer: env.JWT_ISSUER || DEFAULT_TOKEN_CLAIMS.issuer,
    audience: env.JWT_AUDIENCE || DEFAULT_TOKEN_CLAIMS.audience,
  };
}

const ASYMMETRIC = ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA'];

/**
 * Authenticates every request of the routes it guards, as a customer or as the operator, and
 * keeps the caller for `callerOf`. A customer sends `Authorization: Bearer <JWT>`, verified
 * (signature, `exp`, issuer, audience) with jose; its `sub` is the customer id. Missing or
 * invalid credentials answer 401 with a `WWW-Authenticate` challenge; the reason never echoes
 * the token. Invalid ones count as failed authentications (`limitFailedAuthentications`), a
 * forged token also against the customer it names; missing ones count against nobody, and
 * valid ones are never refused for what others sent.
 */
export function authenticate({
  tokens,
  operators,
}: {
  tokens: CustomerTokens;
  operators: readonly Operator[];
}): RequestHandler {
  const operatorNamed = operatorMatcher(operators);
  const verify = verifierOf(tokens);
  return async (req, res, next) => {
    const bearer = bearerOf(req.get('authorization'));
    if (!bearer) throw unauthorized('send Authorization: Bearer <token> (a customer JWT, or the operator token)');
    const operator = operatorNamed?.(bearer);
    if (operator) {
      res.locals.caller = { kind: 'operator', name: operator } satisfies Caller;
      res.locals.operator = operator; // for the audit trail
      return next();
    }
    if (!verify) {
      await failedToAuthenticate(res);
      throw unauthorized('customer tokens are not accepted here: set JWT_SECRET or JWT_JWKS_URL');
    }
    const identity = await verify(bearer);
    if ('refused' in identity) {
      await failedToAuthenticate(res, identity.claimed);
      throw unauthorized(identity.refused);
    }
    res.locals.caller = { kind: 'customer', ...identity } satisfies Caller;
    next();
  };
}

/** The caller `authenticate` let through. */
export function callerOf(res: Response): Caller {
  const caller = (res.locals as { caller?: Caller }).caller;
  if (!caller) throw new Error('callerOf used on a route that authenticate() does not guard');
  return caller;
}

/** A request's client address, for limits per address (`req.ip`: the socket's peer unless express trusts a proxy). */
export const addressOf = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';

/**
 * Signs a customer token, as an identity provider would; for development (`pnpm token`) and
 * tests. `email` becomes OpenID Connect's `email` claim (verified unless told otherwise): the
 * address an order's receipt goes to.
 */
export async function mintCustomerToken(
  { secret, issuer, audience }: Required<Pick<CustomerTokens, 'secret' | 'issuer' | 'audience'>>,
  customerId: string,
  {
    expiresIn = '12h',
    email,
    emailVerified = true,
  }: { expiresIn?: string; email?: string; emailVerified?: boolean } = {},
): Promise<string> {
  return new SignJWT(email === undefined ? {} : { email, email_verified: emailVerified })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(customerId)
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(new TextEncoder().encode(secret));
}

type Identity = { customerId: string; email?: string };
/**
 * Why a token is refused (a sentence for the 401), and, when its signature did not verify, the
 * customer it claims to be: a forgery or a guess, never the customer's own token gone stale.
 */
type Refusal = { refused: string; claimed?: string };
type Verifier = (token: string) => Promise<Identity | Refusal>;

/** OpenID Connect's `email` claim as an address a receipt can go to (the orders contract's bound). */
const emailClaim = z.email().max(254);

function verifierOf(tokens: CustomerTokens): Verifier | undefined {
  const options = { issuer: tokens.issuer, audience: tokens.audience, requiredClaims: ['sub', 'exp'] };
  let verify: (token: string) => Promise<JWTVerifyResult>;
  if (tokens.secret) {
    const key = new TextEncoder().encode(tokens.secret);
    verify = (token) => jwtVerify(token, key, { ...options, algorithms: ['HS256'] });
  } else if (tokens.jwksUrl) {
    const keySet = createRemoteJWKSet(new URL(tokens.jwksUrl));
    verify = (token) => jwtVerify(token, keySet, { ...options, algorithms: ASYMMETRIC });
  } else return undefined;
  const invalid = 'the token is not valid (signature, expiry, issuer or audience)';
  return async (token) => {
    let payload: JWTVerifyResult['payload'];
    try {
      payload = (await verify(token)).payload;
    } catch (error) {
      // A token that fails a check is the caller's problem; a key set that cannot be fetched is ours.
      if (error instanceof errors.JOSEError && !(error instanceof errors.JWKSTimeout)) {
        // jose checks the claims only once the signature verified: such a token is the customer's own.
        const genuine = error instanceof errors.JWTExpired || error instanceof errors.JWTClaimValidationFailed;
        const claimed = genuine ? undefined : claimedSubject(token);
        return { refused: invalid, ...(claimed === undefined ? {} : { claimed }) };
      }
      throw new HttpError('dependency_unavailable', "the identity provider's keys cannot be fetched", { cause: error });
    }
    const refused = (reason: string) => ({ refused: reason });
    const customerId = payload.sub!;
    if (customerId.length === 0 || customerId.length > 255) return refused(invalid);
    if (payload.email === undefined) return { customerId };
    // Unless the provider says the customer proved the address is theirs, mail to it would go to
    // whoever they claimed to be: only the boolean true counts (a string "false" is truthy).
    const verified = payload.email_verified;
    if (verified === undefined && tokens.requireEmailVerified !== false)
      return refused(
        "the token's email comes with no email_verified claim, which this service requires (JWT_REQUIRE_EMAIL_VERIFIED)",
      );
    if (verified !== undefined && verified !== true)
      return refused("the token's email is not verified (email_verified is not true)");
    const email = emailClaim.safeParse(payload.email);
    if (!email.success) return refused("the token's email claim is not an e-mail address");
    return { customerId, email: email.data };
  };
}

/** The `sub` a token that did not verify claims, if it is a JWT with one. */
function claimedSubject(token: string): string | undefined {
  try {
    const { sub } = decodeJwt(token);
    return typeof sub === 'string' && sub.length > 0 ? sub : undefined;
  } catch {
    return undefined; // not a JWT at all: a guess at nobody in particular
  }
}

function unauthorized(message: string): HttpError {
  return new HttpError('unauthorized', message, { headers: { 'WWW-Authenticate': 'Bearer realm="idem"' } });
}
