export {
  runChecks,
  formatReport,
  listStripe,
  KeyInTheClearError,
  SERVICES,
  type CheckerOptions,
  type Finding,
  type Report,
  type Service,
} from './checker.js';
