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

  it("has one hop from the producer's relay into each queue subscribed to a contract, labelled with it", () => {
    const diagram = topologyDiagram();
    expect(diagram).toContain('orders_db -- "orders.order-placed.v1" --> inventory_order_placed_v1');
    expect(diagram).toContain('orders_db -- "orders.order-placed.v1" --> notifications_order_placed_v1');
    expect(diagram).toContain('inventory_order_placed_v1 -- inbox --> inventory_db');
    // One queue, two versions of a contract: an arrow each.
    expect(diagram).toContain('orders_db -- "orders.order-cancelled.v1" --> payments_order_cancelled_v1');
    expect(diagram).toContain('orders_db -- "orders.order-cancelled.v2" --> payments_order_cancelled_v1');
    expect(diagram).not.toMatch(/stream|forwarder/);
  });
});
