/**
 * The system's map, drawn from the catalogue (@idem/shop), never by hand: each service with its
 * database and outbox, each event's queue per consumer (one queue per consumer name), and the
 * inbox that takes it. `pnpm docs:topology` writes it into docs/topology.md;
 * topology.unit.spec.ts fails when the page and the catalogue disagree.
 */
import { SERVICE_NAMES, shop } from '@idem/shop';
import { serviceOf } from '@idem/contracts';

/** A Mermaid flowchart: service → its database (business tables + outbox) → relay → queue → inbox of the consumer's database. */
export function topologyDiagram(): string {
  const lines = ['flowchart LR'];
  for (const service of SERVICE_NAMES) {
    lines.push(`  subgraph ${service}["${service}"]`);
    lines.push(`    ${service}_db[("${service} database<br/>business tables · outbox · inbox")]`);
    lines.push('  end');
  }
  const queues = Object.entries(shop.consumers as Record<string, readonly string[]>).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  for (const [consumer, contracts] of queues) {
    const id = consumer.replaceAll(/[.-]/g, '_');
    const producers = [
      ...new Set(contracts.map((type) => (shop.contracts as Record<string, { producer: string }>)[type]!.producer)),
    ];
    lines.push(`  ${id}[["queue ${consumer}<br/>${contracts.join(', ')}"]]`);
    for (const producer of producers) lines.push(`  ${producer}_db -- relay --> ${id}`);
    lines.push(`  ${id} -- inbox --> ${serviceOf(consumer)}_db`);
  }
  return lines.join('\n');
}

/** docs/topology.md with the diagram in place (between its markers). */
export function withTopology(page: string): string {
  return page.replace(
    /(<!-- topology:start -->)[\s\S]*?(<!-- topology:end -->)/,
    (_all, start: string, end: string) => `${start}\n\n\`\`\`mermaid\n${topologyDiagram()}\n\`\`\`\n\n${end}`,
  );
}
