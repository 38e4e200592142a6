/**
 * Each service's configuration schema and loader, for the tests that check a deployment's
 * environment against what the code reads (docker-compose.yml, the Kubernetes manifests), and
 * the package tables its migrations include.
 */
import { DEFAULT_PORTS } from '@idem/native-run';
import { configSchema as inventoryConfig, loadConfig as loadInventory } from '../services/inventory/src/config.js';
import {
  configSchema as notificationsConfig,
  loadConfig as loadNotifications,
} from '../services/notifications/src/config.js';
import { configSchema as ordersConfig, loadConfig as loadOrders } from '../services/orders/src/config.js';
import { configSchema as paymentsConfig, loadConfig as loadPayments } from '../services/payments/src/config.js';
import { PACKAGE_TABLES as inventoryTables } from '../services/inventory/src/tables.js';
import { PACKAGE_TABLES as notificationsTables } from '../services/notifications/src/tables.js';
import { PACKAGE_TABLES as ordersTables } from '../services/orders/src/tables.js';
import { PACKAGE_TABLES as paymentsTables } from '../services/payments/src/tables.js';

export const SERVICE_CONFIGS = {
  orders: { port: DEFAULT_PORTS.orders, config: ordersConfig, load: loadOrders, tables: ordersTables },
  inventory: { port: DEFAULT_PORTS.inventory, config: inventoryConfig, load: loadInventory, tables: inventoryTables },
  payments: { port: DEFAULT_PORTS.payments, config: paymentsConfig, load: loadPayments, tables: paymentsTables },
  notifications: {
    port: DEFAULT_PORTS.notifications,
    config: notificationsConfig,
    load: loadNotifications,
    tables: notificationsTables,
  },
} as const;

/** Read outside the services' config modules: tracing (@idem/observability) and fault switches (@idem/faults). */
export const READ_ELSEWHERE = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_SERVICE_NAME',
  'IDEM_FAULTS',
  'IDEM_FAULTS_ENABLED',
];

/** The variables of `env` that `service`'s process would not read. */
export function unknownVariables(service: keyof typeof SERVICE_CONFIGS, names: readonly string[]): string[] {
  const known = [...Object.keys(SERVICE_CONFIGS[service].config.shape), ...READ_ELSEWHERE];
  return names.filter((name) => !known.includes(name));
}
