export {
  runChecks,
  formatReport,
  listStripe,
  SERVICES,
  type CheckerOptions,
  type Finding,
  type Report,
  type Service,
} from './checker.js';
