export { createConsole, type ConsoleOptions } from './console.js';
export { DEMO_CATALOG, seedDemoShop } from './demo-data.js';
