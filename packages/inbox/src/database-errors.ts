import { boundReason } from '@idem/contracts';
import { isProcessedMessagesKey } from './partitions.js';

interface DriverAdapterCause {
  readonly originalCode?: string;
  readonly originalMessage?: string;
  readonly kind?: string;
  readonly constraint?: { readonly index?: string; readonly fields?: readonly string[] };
}

interface PrismaLikeError {
  readonly code?: unknown;
  readonly message?: unknown;
  readonly meta?: { readonly driverAdapterError?: { readonly cause?: DriverAdapterCause } };
}

function driverCause(error: unknown): DriverAdapterCause | undefined {
  return (error as PrismaLikeError | undefined)?.meta?.driverAdapterError?.cause;
}

/** The PostgreSQL SQLSTATE behind a Prisma (P2002, P2010, ...) or node-postgres error. */
export function sqlStateOf(error: unknown): string | undefined {
  const cause = driverCause(error);
  if (cause?.originalCode) return cause.originalCode;
  const code = (error as PrismaLikeError | undefined)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** The constraint (index) a PostgreSQL error names, if any. */
export function constraintOf(error: unknown): string | undefined {
  const cause = driverCause(error);
  return cause?.constraint?.index ?? (error as { constraint?: string } | undefined)?.constraint;
}

/**
 * True only for a unique violation of processed_messages' primary key (as the partition holding
 * the record names it, partitions.ts): an error the database raised
 * (through Prisma — P2002 from a model call or P2010 from raw SQL — or straight from
 * node-postgres, which carries the server's `severity`) with SQLSTATE 23505 *and* that
 * constraint name. A unique violation on a business table, a foreign key, a timeout or a lost
 * connection is something else and must not be mistaken for a duplicate.
 */
export function isProcessedMessageConflict(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as PrismaLikeError & { severity?: unknown };
  const fromDatabase = code === 'P2002' || code === 'P2010' || (code === '23505' && typeof severity === 'string');
  return fromDatabase && sqlStateOf(error) === '23505' && isProcessedMessagesKey(constraintOf(error));
}

/** Whether a database error is worth retrying, with a code and a bounded reason to store. */
export interface FailureClassification {
  readonly outcome: 'transient_failure' | 'permanent_failure';
  readonly code: string;
  readonly reason: string;
}

/** Prisma's own codes for a database that could not be reached or answered too late. */
const PRISMA_UNAVAILABLE = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2028']);

/**
 * Classifies what a handler or the database threw. Redelivery can heal a lost connection, a
 * timeout, a serialization conflict or a concurrent writer of the same business key; it
 * cannot heal a foreign-key, check or not-null violation. Anything unrecognised is treated as
 * transient: retries are bounded, and what keeps failing ends as a dead letter.
 */
export function classifyFailure(error: unknown): FailureClassification {
  const state = sqlStateOf(error);
  const message = errorMessage(error);
  const constraint = constraintOf(error);
  const transient = (code: string, reason: string) =>
    ({ outcome: 'transient_failure', code, reason: boundReason(reason) }) as const;

  if (state === '23505') {
    return transient('unique_violation', `unique constraint ${constraint ?? '(unknown)'} violated: ${message}`);
  }
  if (state?.startsWith('23')) {
    return {
      outcome: 'permanent_failure',
      code: 'constraint_violation',
      reason: boundReason(`constraint ${constraint ?? '(unknown)'} violated (SQLSTATE ${state}): ${message}`),
    };
  }
  // Class 22 (data exception: text PostgreSQL cannot store, a number out of range, …) fails the
  // same way every time: retrying it for minutes helps nothing.
  if (state?.startsWith('22')) {
    return {
      outcome: 'permanent_failure',
      code: 'invalid_data',
      reason: boundReason(`data PostgreSQL refuses (SQLSTATE ${state}): ${message}`),
    };
  }
  if (state === '40001' || state === '40P01') return transient('transaction_conflict', message);
  if (state?.startsWith('08') || state?.startsWith('53') || state?.startsWith('57P')) {
    return transient('database_unavailable', message);
  }
  const prismaCode = (error as PrismaLikeError | undefined)?.code;
  if (typeof prismaCode === 'string' && PRISMA_UNAVAILABLE.has(prismaCode)) {
    return transient('database_unavailable', message);
  }
  // node-postgres reports a connection cut under a query (server restart, pg_terminate_backend,
  // network) with a plain Error and no SQLSTATE.
  if (/Connection terminated|connection error|ECONNRESET|ECONNREFUSED/i.test(message)) {
    return transient('database_unavailable', message);
  }
  return transient('unexpected_error', message);
}

function errorMessage(error: unknown): string {
  const cause = driverCause(error);
  if (cause?.originalMessage) return cause.originalMessage;
  const message = (error as PrismaLikeError | undefined)?.message;
  // Prisma prefixes its messages with the invocation site; the last line is the informative one.
  return typeof message === 'string' ? (message.trim().split('\n').at(-1) ?? message) : String(error);
}

/** @internal Thrown inside the transaction by the `rollback-after-handler` fault switch. */
export class ForcedRollback extends Error {
  constructor() {
    super('rollback forced after the handler ran (fault switch rollback-after-handler)');
  }
}
