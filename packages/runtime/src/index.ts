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
  type RunningService,
  type ServiceDefinition,
} from './run-service.js';
export { periodic, pollingWorker, settleAll, type BackgroundWorker } from './periodic.js';
