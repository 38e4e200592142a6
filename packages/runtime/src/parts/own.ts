// The parts that are the service's own: its API, its loops, its gauges.
import type { SqlClient } from '@idem/database';
import type { Express } from 'express';
import type { BackgroundWorker } from '../periodic.js';
import type { ServiceContext, ServicePart } from '../context.js';

/** The service's own HTTP API (role `http`). */
export function api<Tx extends SqlClient>(
  name: string,
  routes: (app: Express, context: ServiceContext<Tx>) => void,
): ServicePart<Tx> {
  return {
    name,
    start: (context) => ({
      routes(app) {
        if (context.roles.has('http')) routes(app, context);
      },
    }),
  };
}

/** A loop of the service's own — a payment worker, an email dispatcher, a cleanup (role `workers`). */
export function worker<Tx extends SqlClient>(
  name: string,
  create: (context: ServiceContext<Tx>) => BackgroundWorker,
): ServicePart<Tx> {
  return {
    name,
    start(context) {
      if (!context.roles.has('workers')) return {};
      const running = create(context);
      running.start();
      return { stop: () => running.stop() };
    },
  };
}

/** Gauges of the service's own (work items by status, ...), on every process. */
export function gauges<Tx extends SqlClient>(register: (context: ServiceContext<Tx>) => void): ServicePart<Tx> {
  return {
    name: 'gauges',
    start(context) {
      register(context);
      return {};
    },
  };
}
