/** `pnpm docs:topology`: draws the system's map into docs/topology.md from the catalogue. */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { withTopology } from '../infra/repository/topology.js';

const page = fileURLToPath(new URL('../docs/topology.md', import.meta.url));
writeFileSync(page, withTopology(readFileSync(page, 'utf8')));
console.log('drew docs/topology.md');
