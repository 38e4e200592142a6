import { z } from 'zod';

/**
 * The envelope every integration message travels in. `messageId` is assigned once, when the
 * producer writes its outbox row, and never changes across relay retries: it is the delivery
 * identity the idempotent consumer deduplicates on.
 */
export const envelopeSchema = z.object({
  messageId: z.uuid(),
  type: z.string().min(1).max(200),
  producer: z.string().min(1).max(100),
  occurredAt: z.iso.datetime({ offset: true }),
  correlationId: z.uuid(),
  causationId: z.uuid().nullable(),
  aggregateId: z.string().min(1).max(200),
  aggregateVersion: z.number().int().nonnegative().max(2_147_483_647),
  traceparent: z.string().max(256).optional(),
  body: z.unknown(),
});

/** An envelope whose body has not been checked against its contract yet. */
export type RawEnvelope = z.infer<typeof envelopeSchema>;

/** Any validated envelope, of any catalogue: what the inbox and the broker carry without reading the body. */
export type AnyEnvelope = Omit<RawEnvelope, 'body'> & { readonly body: unknown };
