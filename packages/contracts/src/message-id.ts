import { randomFillSync } from 'node:crypto';

/**
 * A new message id: a UUID version 7 (RFC 9562) — its first 48 bits the time `at` in Unix
 * milliseconds, the rest random. Any UUID is a valid message id (the envelope's schema); this one also says
 * when its message was made, so ids sort by time and an inbox can keep its processed records in
 * partitions of time ranges keyed by the id itself (@idem/inbox, partitions.ts).
 */
export function newMessageId(at: Date): string {
  const bytes = randomFillSync(new Uint8Array(16));
  let ms = at.getTime();
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70; // version 7
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // the RFC's variant
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
