import type { RawEnvelope } from './envelope.js';
import type { StandardSchemaV1 } from './standard-schema.js';

/** One versioned contract of a catalogue: who produces it, its body's schema, who consumes it. */
export interface ContractSpec {
  /** The service that produces it: the envelope's `producer`. */
  readonly producer: string;
  /** The body's schema: zod, valibot, arktype — any Standard Schema validator. */
  readonly body: StandardSchemaV1;
  /**
   * The consumers that subscribe to it, by their stable names: each is also the name of its
   * queue and half of the inbox's dedupe key `(consumer, message_id)`. Renaming one replays
   * every message still retained. A consumer keeps its name when it moves to a newer version of
   * the contract: it subscribes to both, under one dedupe key.
   */
  readonly consumers: readonly string[];
}

/** Every integration event of a system, by versioned name (`<service>.<event>.v<N>`). */
export type CatalogueSpec = { readonly [type: string]: ContractSpec };

/** A catalogue's event types. */
export type EventType<S extends CatalogueSpec> = Extract<keyof S, string>;
/** The body of event `T`, as its schema gives it once validated. */
export type EventBody<S extends CatalogueSpec, T extends EventType<S>> = StandardSchemaV1.InferOutput<S[T]['body']>;
/** An envelope whose body was validated against its contract `T` (a union over `T`). */
export type Envelope<S extends CatalogueSpec, T extends EventType<S> = EventType<S>> =
  T extends EventType<S> ? Omit<RawEnvelope, 'type' | 'body'> & { type: T; body: EventBody<S, T> } : never;
/** A catalogue's consumer names. */
export type ConsumerName<S extends CatalogueSpec> = S[EventType<S>]['consumers'][number];
/** The contract a consumer subscribes to: one, or (while a producer moves to a new version) several versions of one. */
export type ContractOf<S extends CatalogueSpec, C extends ConsumerName<S>> = {
  [T in EventType<S>]: C extends S[T]['consumers'][number] ? T : never;
}[EventType<S>];
/** What a consumer's handler receives: the envelope of the contract it subscribes to. */
export type MessageOf<S extends CatalogueSpec, C extends ConsumerName<S>> = Envelope<S, ContractOf<S, C>>;

/** A catalogue as the packages take it: its contracts, and each consumer with the contracts it takes. */
export interface Catalogue<S extends CatalogueSpec = CatalogueSpec> {
  readonly contracts: S;
  readonly consumers: { readonly [C in ConsumerName<S>]: readonly ContractOf<S, C>[] };
}

const VERSIONED = /^[a-z0-9-]+\.[a-z0-9-]+\.v\d+$/;
const CONSUMER = /^[a-z0-9-]+\.[a-z0-9.-]+$/;

/**
 * Whether `name` has a consumer name's form (`<service>.<name>`, lower-case letters, digits, `-`
 * and `.`): no `:`, `{` or `}`, so no key a broker derives from it falls under another name's.
 */
export const isConsumerNameForm = (name: string): boolean => CONSUMER.test(name);

/**
 * Declares a system's catalogue: each event type (versioned: `library.book-lent.v1`) with its
 * producer, its body's schema and its consumers. The inbox, outbox, relay, publisher and
 * consumers take it and are typed by it; throws for a name they could not carry.
 */
export function defineCatalogue<const S extends CatalogueSpec>(contracts: S): Catalogue<S> {
  const consumers: Record<string, string[]> = {};
  for (const [type, contract] of Object.entries(contracts)) {
    if (!VERSIONED.test(type)) throw new Error(`"${type}" is not a versioned contract name (<service>.<event>.v<N>)`);
    if (!contract.producer) throw new Error(`${type} names no producer`);
    for (const name of contract.consumers) {
      if (!isConsumerNameForm(name))
        throw new Error(`"${name}" (a consumer of ${type}) is not a consumer name (<service>.<name>)`);
      (consumers[name] ??= []).push(type);
    }
  }
  return { contracts, consumers } as unknown as Catalogue<S>;
}

/** The consumers of an event type. */
export const subscribersOf = <S extends CatalogueSpec, T extends EventType<S>>(
  catalogue: Catalogue<S>,
  type: T,
): S[T]['consumers'] => catalogue.contracts[type]!.consumers;

/** Whether `type` is an event type the catalogue knows (narrows a string read from outside). */
export const isEventType = <S extends CatalogueSpec>(catalogue: Catalogue<S>, type: string): type is EventType<S> =>
  Object.hasOwn(catalogue.contracts, type);

/** Whether `name` is a consumer the catalogue knows (narrows a string from a queue or an operator). */
export const isConsumerName = <S extends CatalogueSpec>(
  catalogue: Catalogue<S>,
  name: string,
): name is ConsumerName<S> => Object.hasOwn(catalogue.consumers, name);

/** The service a consumer name belongs to, by the naming convention: the part before the first dot. */
export function serviceOf(name: string): string {
  return name.slice(0, name.indexOf('.'));
}

/**
 * What a service reaches at the broker: the queues of its own consumers (named `<service>.…`), the
 * contracts it publishes, its consumers' subscriptions (each consumer and a contract it subscribes
 * to), and the consumers its contracts are delivered to (their queues, which its publications
 * write). What its Redis user may reach (@idem/messaging's `redisUserOf`), and nothing more.
 */
export function reachOf<S extends CatalogueSpec>(
  catalogue: Catalogue<S>,
  service: string,
): {
  consumes: ConsumerName<S>[];
  publishes: EventType<S>[];
  subscribes: { contract: EventType<S>; consumer: ConsumerName<S> }[];
  deliversTo: ConsumerName<S>[];
} {
  const consumes = (Object.keys(catalogue.consumers) as ConsumerName<S>[]).filter(
    (name) => serviceOf(name) === service,
  );
  const types = Object.keys(catalogue.contracts) as EventType<S>[];
  const publishes = types.filter((type) => catalogue.contracts[type]!.producer === service);
  return {
    consumes,
    publishes,
    subscribes: consumes.flatMap((consumer) =>
      (catalogue.consumers[consumer] as readonly EventType<S>[]).map((contract) => ({ contract, consumer })),
    ),
    deliversTo: [...new Set(publishes.flatMap((type) => catalogue.contracts[type]!.consumers as ConsumerName<S>[]))],
  };
}

/** The services that publish events (those with an outbox and a relay). */
export const publishersOf = <S extends CatalogueSpec>(catalogue: Catalogue<S>): string[] => [
  ...new Set(Object.values(catalogue.contracts).map((contract) => contract.producer)),
];
