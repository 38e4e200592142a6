import type { Catalogue, CatalogueSpec } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import type { Faults } from '@idem/faults';
import type { Operator } from '@idem/http';
import type { DeliveryJournal, Publisher, RedisClient } from '@idem/messaging';
import type { Metrics } from '@idem/observability';
import type { Handlers, Idem } from '@idem/service';
import type { Express } from 'express';
import type { BaseConfig } from './config.js';
import type { Logger } from './logger.js';

/** A role a process runs (IDEM_ROLES); the native run and compose run them all in one process. */
export type Role = BaseConfig['IDEM_ROLES'] extends Set<infer R> ? R : never;

/** What every part of a service shares: built once per process by {@link runService}. */
export interface ServiceContext<Tx extends SqlClient = SqlClient> {
  readonly name: string;
  readonly catalogue: Catalogue;
  readonly config: BaseConfig;
  readonly log: Logger;
  readonly db: TransactionalClient<Tx>;
  readonly faults: Faults;
  /** The roles this process runs: a part starts only what its role asks for. */
  readonly roles: ReadonlySet<Role>;
  readonly metrics: Metrics;
  /** The Idempotent Consumer's parts this process runs (`@idem/service`): its inbox, dead letters, parked rows. */
  readonly idem: Idem<Tx, Publisher>;
  readonly publisher: Publisher;
  /** Where deliveries (and the service's own provider calls) are recorded for people to see. */
  readonly journal: DeliveryJournal;
  /** The process's Redis connection (rate limits count there). */
  readonly redis: RedisClient;
  /** This process, as the journal and the console name it. */
  readonly process: string;
  /** Who may call the operator routes (ADMIN_TOKEN, ADMIN_TOKENS); none: they are disabled. */
  readonly operators: readonly Operator[];
}

/** What a part leaves running: its routes (added when the process serves HTTP) and how it stops. */
export interface StartedPart {
  readonly routes?: (app: Express) => void;
  readonly stop?: () => Promise<void>;
}

/**
 * One named piece of a service — its consumers, its outbox relay, a worker, its API, the
 * operator's routes — that the composition root (each service's `service.ts`) lists.
 */
export interface ServicePart<Tx extends SqlClient = SqlClient> {
  /** What the startup log calls it. */
  readonly name: string;
  start(context: ServiceContext<Tx>): StartedPart | Promise<StartedPart>;
}

export interface ServiceDefinition<Tx extends SqlClient, S extends CatalogueSpec = CatalogueSpec> {
  readonly name: string;
  /** The system's catalogue of events: what the service's consumers take and its relay publishes. */
  readonly catalogue: Catalogue<S>;
  readonly config: BaseConfig;
  readonly log: Logger;
  readonly db: TransactionalClient<Tx> & { $disconnect(): Promise<unknown> };
  readonly faults: Faults;
  /** @defaultValue () => new Date() */
  readonly now?: () => Date;
  /** Its consumers, by their name in the catalogue (role `consumers`), and the operator's dead-letter routes. */
  readonly consumers?: Handlers<NoInfer<Tx>, S>;
  /** It publishes through its outbox: the handoff and the relay (role `relay`), and the parked rows' routes. */
  readonly outbox?: boolean;
  /** What else it runs, in the order it starts (and the reverse order it stops). */
  readonly parts: readonly ServicePart<NoInfer<Tx>>[];
}

/** Calls made while a read is under way share its answer, so the gauges of one scrape cost one read. */
export function sharedWhileInFlight<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => (inFlight ??= read().finally(() => (inFlight = undefined)));
}
