export {
  runChecks,
  formatReport,
  listStripe,
  LiveKeyInTheClearError,
  SERVICES,
  type CheckerOptions,
  type Finding,
  type Report,
  type Service,
} from './checker.js';
