import pg from 'pg';
import type { SqlClient } from './sql-client.js';

/**
 * LISTENs on `channel` with a connection of its own, calling `onNotification` for each
 * notification — and once on connecting, for what was written while nobody listened. When the
 * connection fails it reconnects after `retryMs`, until closed. A notification is delivered when
 * the transaction that sent it commits (`notify`): a listener wakes for committed work only.
 */
export function listen(
  databaseUrl: string,
  channel: string,
  {
    onNotification,
    onError,
    retryMs,
  }: { onNotification: () => void; onError: (error: unknown) => void; retryMs: number },
): { close(): Promise<void> } {
  let listener: pg.Client | undefined;
  let closed = false;
  const connect = async () => {
    if (closed) return;
    const client = new pg.Client({ connectionString: databaseUrl });
    const retry = () => {
      if (listener === client) listener = undefined;
      client.end().catch(() => {});
      if (!closed) setTimeout(() => void connect(), retryMs);
    };
    client.on('notification', onNotification);
    client.on('error', (error) => {
      onError(error);
      retry();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      if (closed) return void client.end().catch(() => {});
      listener = client;
      onNotification(); // what was written while nobody listened
    } catch (error) {
      onError(error);
      retry();
    }
  };
  void connect();
  return {
    async close() {
      closed = true;
      await listener?.end().catch(() => {});
      listener = undefined;
    },
  };
}

/** Wakes whoever LISTENs on `channel` once the caller's transaction commits (one statement). */
export async function notify(tx: SqlClient, channel: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_notify(${channel}, '')`;
}
