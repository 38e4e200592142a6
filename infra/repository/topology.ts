/**
 * The system's map, drawn from the catalogue (@idem/shop), never by hand: each service with its
 * database and outbox, each consumer's queue (one per consumer name), an arrow from the producer's
 * relay into it for each contract it subscribes to (the one hop: the relay adds each message to
 * every subscriber's queue), and the inbox that takes it. `pnpm docs:topology` writes it into
 * docs/topology.md; topology.unit.spec.ts fails when the page and the catalogue disagree.
 */
import { SERVICE_NAMES, shop } from '@idem/shop';
import { serviceOf } from '@idem/contracts';

/** A Mermaid node id for a consumer's name. */
const idOf = (name: string) => name.replaceAll(/[.-]/g, '_');

/**
 * A Mermaid flowchart: service → its database (business tables + outbox) → relay, labelled with
 * the contract → the consumer's queue → inbox of the consumer's database.
 */
export function topologyDiagram(): string {
  const lines = ['flowchart LR'];
  for (const service of SERVICE_NAMES) {
    lines.push(`  subgraph ${service}["${service}"]`);
    lines.push(`    ${service}_db[("${service} database<br/>business tables · outbox · inbox")]`);
    lines.push('  end');
  }
  const contracts = shop.contracts as Record<string, { producer: string }>;
  const queues = Object.entries(shop.consumers as Record<string, readonly string[]>).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  for (const [consumer, subscribed] of queues) {
    const id = idOf(consumer);
    lines.push(`  ${id}[["queue ${consumer}"]]`);
    for (const contract of subscribed) lines.push(`  ${contracts[contract]!.producer}_db -- "${contract}" --> ${id}`);
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
