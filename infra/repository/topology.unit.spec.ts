import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { topologyDiagram, withTopology } from './topology.js';

const page = fileURLToPath(new URL('../../docs/topology.md', import.meta.url));

describe('docs/topology.md', () => {
  it('draws the catalogue as it is: every consumer queue, from its producers to its inbox (pnpm docs:topology)', () => {
    const text = readFileSync(page, 'utf8');
    expect(text).toContain(topologyDiagram());
    expect(withTopology(text)).toBe(text);
  });

  it('has a queue for each consumer and an arrow from each producer of its events', () => {
    const diagram = topologyDiagram();
    expect(diagram).toContain('inventory_order_placed_v1 -- inbox --> inventory_db');
    expect(diagram).toContain('orders_db -- relay --> inventory_order_placed_v1');
    expect(diagram).toContain('payments_db -- relay --> notifications_payment_captured_v1');
  });
});
