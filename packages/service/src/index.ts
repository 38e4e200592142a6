export {
  startIdem,
  type Handlers,
  type Idem,
  type IdemOptions,
  type Maintenance,
  type Retention,
} from './start-idem.js';
export { RetentionError } from '@idem/inbox';
export { ReplayTruncatedError, ReplayWindowError } from '@idem/transport';
