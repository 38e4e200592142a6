export {
  startIdem,
  type Handlers,
  type Idem,
  type IdemOptions,
  type Maintenance,
  type RelaySettings,
  type Retention,
  type Runs,
} from './start-idem.js';
export { RetentionError } from '@idem/inbox';
export { ReplayTruncatedError, ReplayWindowError } from '@idem/transport';
