/**
 * Each service's configuration schema and loader, for the tests that check a deployment's
 * environment against what the code reads (docker-compose.yml, the Kubernetes manifests), and
 * the package tables its migrations include — read from every service in the registry.
 */
import { SERVICE_NAMES, SERVICE_REGISTRY, type ServiceName } from '@idem/shop';
import type { TableSet } from '@idem/database';
import type { BaseConfig } from '@idem/runtime';

/** A service's configuration schema: its variables are the keys of its shape. */
interface ConfigSchema {
  readonly shape: Record<string, unknown>;
}

interface ServiceConfig {
  readonly port: number;
  readonly config: ConfigSchema;
  readonly load: (env: NodeJS.ProcessEnv) => BaseConfig;
  readonly tables: readonly TableSet[];
}

export const SERVICE_CONFIGS = Object.fromEntries(
  await Promise.all(
    SERVICE_NAMES.map(async (service) => {
      const { configSchema, loadConfig } = (await import(`../../services/${service}/src/config.ts`)) as {
        configSchema: ConfigSchema;
        loadConfig: ServiceConfig['load'];
      };
      const { PACKAGE_TABLES } = (await import(`../../services/${service}/src/tables.ts`)) as {
        PACKAGE_TABLES: readonly TableSet[];
      };
      const entry: ServiceConfig = {
        port: SERVICE_REGISTRY[service].port,
        config: configSchema,
        load: loadConfig,
        tables: PACKAGE_TABLES,
      };
      return [service, entry];
    }),
  ),
) as Record<ServiceName, ServiceConfig>;

/** Read outside the services' config modules: tracing (@idem/observability) and fault switches (@idem/faults). */
export const READ_ELSEWHERE = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_SERVICE_NAME',
  'IDEM_FAULTS',
  'IDEM_FAULTS_ENABLED',
];

/** The variables of `env` that `service`'s process would not read. */
export function unknownVariables(service: ServiceName, names: readonly string[]): string[] {
  const known = [...Object.keys(SERVICE_CONFIGS[service].config.shape), ...READ_ELSEWHERE];
  return names.filter((name) => !known.includes(name));
}
