export { runChecks, formatReport, listStripe, type CheckerOptions, type Finding, type Report } from './checker.js';
