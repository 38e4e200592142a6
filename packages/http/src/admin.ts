import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { HttpError } from './errors.js';

/**
 * Guards operator endpoints with `Authorization: Bearer <ADMIN_TOKEN>`. Without a configured
 * token they are disabled. Tokens are compared in constant time (as digests, so their
 * lengths leak nothing either).
 */
export function requireAdmin(token: string | undefined): RequestHandler {
  const isOperator = adminTokenMatcher(token);
  return (req, _res, next) => {
    if (!isOperator) throw new HttpError('admin_disabled', 'set ADMIN_TOKEN to enable operator endpoints');
    const header = req.get('authorization') ?? '';
    const match = /^Bearer (.+)$/.exec(header);
    if (!match) throw new HttpError('unauthorized', 'send Authorization: Bearer <ADMIN_TOKEN>');
    if (!isOperator(match[1]!)) throw new HttpError('forbidden', 'the operator token is not valid');
    next();
  };
}

/** Whether a presented token is the operator's; undefined when no ADMIN_TOKEN is configured. */
export function adminTokenMatcher(token: string | undefined): ((presented: string) => boolean) | undefined {
  if (!token) return undefined;
  const expected = digest(token);
  return (presented) => timingSafeEqual(digest(presented), expected);
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
