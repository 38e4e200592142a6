export { runChaos, formatChaosReport, type ChaosOptions, type ChaosReport } from './chaos.js';
export {
  PROVIDER_SCENARIOS,
  runProviderFaults,
  runNotificationsBacklog,
  runNotificationsPause,
  formatProviderFaultsReport,
  formatPauseDrain,
  type EmailCopies,
  type PauseDrain,
  type ProviderFaultsOptions,
  type ProviderFaultsReport,
} from './providers.js';
