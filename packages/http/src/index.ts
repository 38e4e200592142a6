export { HttpError, STATUS_OF, type ErrorCode, type FieldError } from './errors.js';
export { sendProblem, problemHandler, notFoundHandler, MEANINGS, problemType } from './problem.js';
export { validate } from './validate.js';
export {
  requireOperator,
  operatorsFromEnv,
  operatorTokensProblem,
  operatorOf,
  bearerOf,
  type Operator,
} from './operators.js';
export { auditTo, auditResult, correlationIdOf, type AuditEvent, type AuditSink } from './audit.js';
export type { AccessLogEntry } from './access-log.js';
export {
  createHttpApp,
  listen,
  type HealthCheck,
  type HttpAppOptions,
  type ListenOptions,
  type RunningServer,
} from './app.js';
export {
  authenticate,
  callerOf,
  addressOf,
  mintCustomerToken,
  DEFAULT_TOKEN_CLAIMS,
  DEVELOPMENT_JWT_SECRET,
  isLoopbackAddress,
  customerTokensFromEnv,
  type Caller,
  type CustomerTokens,
} from './callers.js';
export { rateLimit, limitFailedAuthentications, type RateLimit } from './rate-limit.js';
export {
  answer,
  route,
  openApiDocument,
  serveOpenApi,
  type Answer,
  type Audience,
  type Input,
  type Operation,
} from './openapi.js';
export { localToolGuard, localToolHeaders, hostList, operatorOnlyBeyondLoopback } from './local-tools.js';
