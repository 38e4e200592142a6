import { baseConfigSchema, parseConfig } from '@idem/runtime';

export const configSchema = baseConfigSchema('inventory', 3002);
export type InventoryConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(configSchema, env);
}
