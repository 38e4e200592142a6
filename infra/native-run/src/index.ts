export {
  runStories,
  placeOrder,
  waitForStatus,
  getJson,
  CUSTOMER,
  type StoryResult,
  type SystemUrls,
} from './stories.js';
export {
  asCustomer,
  asOperator,
  customerToken,
  customerTokensOf,
  DEVELOPMENT_JWT_SECRET,
  type OperatorTokens,
} from './tokens.js';
export {
  startSystem,
  describeSystem,
  systemFromEnv,
  SERVICES,
  DEFAULT_PORTS,
  QUICK_TAKEOVER_ENV,
  UNLIMITED_ORDERS_ENV,
  type RunningSystem,
  type ServiceName,
  type SystemOptions,
} from './system.js';
export {
  buildService,
  bundlesStartedBy,
  deployPackage,
  deployServices,
  MIGRATE_IMAGE_SERVICES,
  pruneDeploy,
  SERVICE_IMAGE_COMMAND,
  type DeployedServices,
} from './deployed.js';
export { unreachablePrerequisites, type Prerequisites } from './prerequisites.js';
export { duplicateStory, type DuplicateStory, type ConsumerCount } from './duplicate-story.js';
