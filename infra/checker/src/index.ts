export { runChecks, formatReport, type CheckerOptions, type Finding, type Report } from './checker.js';
