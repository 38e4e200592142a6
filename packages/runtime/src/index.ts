export { baseConfigSchema, parseConfig, ConfigError, type BaseConfig } from './config.js';
export { createLogger, logDelivery, type Logger } from './logger.js';
export {
  runService,
  journalFor,
  processName,
  stopOnSignal,
  SHUTDOWN_TIMEOUT_MS,
  consumer,
  type ConsumerSpec,
  type BackgroundWorker,
  type RunningService,
  type ServiceDefinition,
} from './run-service.js';
export { periodic, pollingWorker, settleAll } from './periodic.js';
