import { publishersOf } from '@idem/contracts';
import { shop } from './catalogue.js';

/**
 * The services, in one place: each one's HTTP port (native run; compose and Kubernetes use the
 * same in their containers), and — through the topology — what it consumes and publishes. Its
 * database and role are named after it. Every other list of services is derived from this one
 * or checked against it (infra/repository/service-registry.unit.spec.ts).
 */
export const SERVICE_REGISTRY = {
  orders: { port: 3001 },
  inventory: { port: 3002 },
  payments: { port: 3003 },
  notifications: { port: 3004 },
} as const;

export type ServiceName = keyof typeof SERVICE_REGISTRY;
export const SERVICE_NAMES = Object.keys(SERVICE_REGISTRY) as ServiceName[];

/** The services that publish events (those with an outbox and a relay), from the catalogue. */
export const PUBLISHERS = SERVICE_NAMES.filter((service) => publishersOf(shop).includes(service));
