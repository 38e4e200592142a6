/**
 * The system's map, drawn from the catalogue (@idem/shop), never by hand: each service with its
 * database and outbox, the stream each contract is published to, each consumer's forwarder from
 * the streams it subscribes to into its queue (one queue per consumer name), and the inbox that
 * takes it. `pnpm docs:topology` writes it into docs/topology.md; topology.unit.spec.ts fails when
 * the page and the catalogue disagree.
 */
import { SERVICE_NAMES, shop } from '@idem/shop';
import { serviceOf } from '@idem/contracts';

/** A Mermaid node id for a contract's or a consumer's name. */
const idOf = (name: string) => name.replaceAll(/[.-]/g, '_');

/**
 * A Mermaid flowchart: service → its database (business tables + outbox) → relay → the
 * contract's stream → the consumer's forwarder → its queue → inbox of the consumer's database.
 */
export function topologyDiagram(): string {
  const lines = ['flowchart LR'];
  for (const service of SERVICE_NAMES) {
    lines.push(`  subgraph ${service}["${service}"]`);
    lines.push(`    ${service}_db[("${service} database<br/>business tables · outbox · inbox")]`);
    lines.push('  end');
  }
  const contracts = Object.entries(shop.contracts as Record<string, { producer: string }>).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  for (const [contract, { producer }] of contracts) {
    lines.push(`  stream_${idOf(contract)}[/"stream ${contract}"/]`);
    lines.push(`  ${producer}_db -- relay --> stream_${idOf(contract)}`);
  }
  const queues = Object.entries(shop.consumers as Record<string, readonly string[]>).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  for (const [consumer, subscribed] of queues) {
    const id = idOf(consumer);
    lines.push(`  ${id}[["queue ${consumer}"]]`);
    for (const contract of subscribed) lines.push(`  stream_${idOf(contract)} -- forwarder --> ${id}`);
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
