import { randomUUID } from 'node:crypto';
import {
  createEnvelope,
  parseEnvelope,
  type Catalogue,
  type CatalogueSpec,
  type Envelope,
  type EventBody,
  type EventType,
} from '@idem/contracts';

/** What a test may set on an envelope; everything else is fresh. */
export interface TestEnvelopeOptions {
  /** @defaultValue a random UUID */
  readonly aggregateId?: string;
  /** @defaultValue 1 */
  readonly aggregateVersion?: number;
  /** @defaultValue a random UUID */
  readonly correlationId?: string;
  /** @defaultValue null: at the edge */
  readonly causationId?: string | null;
  /** When it occurred; also the time in its message id (a UUID v7). @defaultValue now */
  readonly at?: Date;
}

/**
 * A valid envelope of `type` in your catalogue, as its producer would publish it: a new message
 * id (a UUID v7), the producer the catalogue names, a fresh correlation and aggregate id. The
 * body is checked against the contract's schema, so a test that builds a wrong one fails here,
 * naming the contract and the field, not later in the handler; the envelope returned is the
 * one the schema gives (defaults applied), as a consumer receives it.
 */
export async function testEnvelope<S extends CatalogueSpec, T extends EventType<S>>(
  catalogue: Catalogue<S>,
  type: T,
  body: EventBody<S, T>,
  { at = new Date(), ...options }: TestEnvelopeOptions = {},
): Promise<Envelope<S, T>> {
  const draft = createEnvelope(
    catalogue,
    {
      type,
      body,
      aggregateId: options.aggregateId ?? randomUUID(),
      aggregateVersion: options.aggregateVersion ?? 1,
      correlationId: options.correlationId ?? randomUUID(),
      causationId: options.causationId ?? null,
    },
    at,
  );
  const parsed = await parseEnvelope(catalogue, JSON.parse(JSON.stringify(draft)), type);
  if (!parsed.ok) throw new TypeError(`not a valid ${type}: ${parsed.error.reason}`);
  return parsed.envelope;
}
