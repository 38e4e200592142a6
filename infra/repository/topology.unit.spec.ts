import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { topologyDiagram, withTopology } from './topology.js';

const page = fileURLToPath(new URL('../../docs/topology.md', import.meta.url));

describe('docs/topology.md', () => {
  it('draws the catalogue as it is: every stream, forwarder and consumer queue, from its producer to its inbox (pnpm docs:topology)', () => {
    const text = readFileSync(page, 'utf8');
    expect(text).toContain(topologyDiagram());
    expect(withTopology(text)).toBe(text);
  });

  it('has a stream per contract from its producer, and a forwarder from each stream to each queue subscribed to it', () => {
    const diagram = topologyDiagram();
    expect(diagram).toContain('orders_db -- relay --> stream_orders_order_placed_v1');
    expect(diagram).toContain('stream_orders_order_placed_v1 -- forwarder --> inventory_order_placed_v1');
    expect(diagram).toContain('stream_orders_order_placed_v1 -- forwarder --> notifications_order_placed_v1');
    expect(diagram).toContain('inventory_order_placed_v1 -- inbox --> inventory_db');
    // One queue, two versions of a contract: a stream each.
    expect(diagram).toContain('stream_orders_order_cancelled_v2 -- forwarder --> payments_order_cancelled_v1');
    expect(diagram).toContain('payments_db -- relay --> stream_payments_payment_captured_v1');
    // Nothing goes from a relay to a queue: a producer knows no consumer.
    expect(diagram).not.toMatch(/_db -- relay --> (?!stream_)/);
  });
});
