export { runChaos, formatChaosReport, type ChaosOptions, type ChaosReport } from './chaos.js';
