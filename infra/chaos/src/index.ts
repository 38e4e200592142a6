export { runChaos, formatChaosReport, type ChaosOptions, type ChaosReport } from './chaos.js';
export {
  runProviderFaults,
  runNotificationsBacklog,
  formatProviderFaultsReport,
  type ProviderFaultsOptions,
  type ProviderFaultsReport,
} from './providers.js';
