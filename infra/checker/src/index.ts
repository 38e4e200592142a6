export {
  runChecks,
  formatReport,
  listStripe,
  listMail,
  fetchMailApi,
  KeyInTheClearError,
  SERVICES,
  type CheckerOptions,
  type Finding,
  type Report,
  type Service,
} from './checker.js';
