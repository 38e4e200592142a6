import { describe, expect, it } from 'vitest';
import { statementKind } from './count-round-trips.js';
import { attribute, ownerOf } from './profile.js';

const frame = (id: number, functionName: string, url: string, children: number[] = []) => ({
  id,
  callFrame: { functionName, url },
  children,
});

describe('the CPU profile attribution', () => {
  it('names who a frame belongs to: a library group, an idem package, a service, or nobody (Node.js)', () => {
    expect(ownerOf('file:///r/node_modules/.pnpm/ioredis@5.9.2/node_modules/ioredis/built/Command.js', 'f')).toBe(
      'BullMQ + ioredis',
    );
    expect(ownerOf('file:///r/node_modules/.pnpm/@prisma+client@7/node_modules/@prisma/client/runtime/x.js', 'f')).toBe(
      'Prisma',
    );
    expect(ownerOf('file:///r/node_modules/@opentelemetry/api/build/x.js', 'f')).toBe('OpenTelemetry');
    expect(ownerOf('file:///r/packages/inbox/src/inbox.ts', 'consume')).toBe('@idem/inbox');
    expect(ownerOf('file:///r/services/orders/src/http/routes.ts', 'f')).toBe('orders (own code)');
    expect(ownerOf('node:internal/stream_base_commons', 'writev')).toBeUndefined();
    expect(ownerOf('', '(garbage collector)')).toBe('(garbage collector)');
  });

  it("charges Node.js's own frames to their nearest caller outside Node.js, leaves idle out, and keeps to the window", () => {
    const profile = {
      nodes: [
        frame(1, '(root)', '', [2, 5, 6]),
        frame(2, 'query', 'file:///r/node_modules/pg/lib/client.js', [3]),
        frame(3, 'write', 'node:net', [4]),
        frame(4, 'writev', ''),
        frame(5, '(idle)', ''),
        frame(6, 'processTimers', 'node:internal/timers'),
      ],
      startTime: 1_000,
      // µs since the previous sample: 2 ms in writev, 5 ms idle, 1 ms in timers, then 3 ms in writev after the window.
      samples: [4, 5, 6, 4],
      timeDeltas: [2_000, 5_000, 1_000, 3_000],
    };
    expect(Object.fromEntries(attribute(profile, 0, 9_000))).toEqual({
      'node-postgres': 2,
      'Node.js (event loop, I/O, timers)': 1,
    });
  });

  it('names a statement by its verb and the table it writes or reads', () => {
    expect(statementKind('BEGIN')).toBe('BEGIN');
    expect(statementKind('INSERT INTO processed_messages (consumer) VALUES ($1)')).toBe('INSERT processed_messages');
    expect(
      statementKind(
        "WITH inserted AS (\n INSERT INTO outbox_messages (x) VALUES ($1) RETURNING 1) SELECT pg_notify($2, '') FROM inserted",
      ),
    ).toBe('WITH … INSERT outbox_messages');
    expect(statementKind('SELECT message_id FROM outbox_messages WHERE x FOR UPDATE SKIP LOCKED')).toBe(
      'SELECT outbox_messages',
    );
    expect(statementKind('INSERT INTO "public"."orders" ("id") VALUES ($1) ON CONFLICT (id) DO UPDATE SET x = 1')).toBe(
      'INSERT orders',
    );
    expect(statementKind('SELECT pg_try_advisory_xact_lock($1)')).toBe('SELECT pg_try_advisory_xact_lock()');
  });
});
