import type { Model } from '../model.js';
import { inventory } from './inventory.js';
import { notifications } from './notifications.js';
import { orders } from './orders.js';
import { payments } from './payments.js';

/** The services the explorer knows, by name. */
export const MODELS: Readonly<Record<string, Model>> = { orders, inventory, payments, notifications };
