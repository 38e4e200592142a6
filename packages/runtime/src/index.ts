export { baseConfigSchema, parseConfig, ConfigError, type BaseConfig } from './config.js';
export { createLogger, logDelivery, type Logger } from './logger.js';
export { runService, processName, stopOnSignal, SHUTDOWN_TIMEOUT_MS, type RunningService } from './run-service.js';
export type { Role, ServiceContext, ServiceDefinition, ServicePart, StartedPart } from './context.js';
export { faultSwitches } from './parts/fault-switches.js';
export { api, worker, gauges } from './parts/own.js';
export {
  periodic,
  pollingWorker,
  awaitAll,
  type BackgroundWorker,
  type PollingRound,
  type PollingWorker,
} from './periodic.js';
