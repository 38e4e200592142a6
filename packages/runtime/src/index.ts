export { baseConfigSchema, parseConfig, ConfigError, type BaseConfig } from './config.js';
export { createLogger, logDelivery, type Logger } from './logger.js';
export {
  runService,
  processName,
  stopOnSignal,
  SHUTDOWN_TIMEOUT_MS,
  type Role,
  type RunningService,
  type ServiceContext,
  type ServiceDefinition,
  type ServicePart,
  type StartedPart,
} from './run-service.js';
export { consumer, consumers, type ConsumerSpec } from './parts/consumers.js';
export { outbox } from './parts/outbox.js';
export { inboxRetention } from './parts/inbox-retention.js';
export { deadLetters } from './parts/dead-letter-routes.js';
export { faultSwitches } from './parts/fault-switches.js';
export { api, worker, gauges } from './parts/own.js';
export { periodic, pollingWorker, awaitAll, type BackgroundWorker } from './periodic.js';
