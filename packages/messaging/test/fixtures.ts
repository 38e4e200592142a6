/**
 * Shared by the messaging tests and the child processes they SIGKILL: a business change
 * that is visibly wrong when applied twice, and helpers to start real processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Envelope } from '@idem/contracts';
import { processed, type MessageHandler } from '@idem/inbox';
import type { PrismaClient } from '@idem/testkit';

export type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/** Takes one unit of stock for the consumer (its own stock row) and records the reservation. */
export const reserveOneUnit =
  (consumer: string): MessageHandler<Tx, Envelope<'orders.order-placed.v1'>> =>
  async (message, tx) => {
    await tx.stockItem.update({ where: { sku: consumer }, data: { available: { decrement: 1 } } });
    if (consumer === 'inventory.order-placed.v1') {
      await tx.reservation.create({ data: { orderId: message.body.orderId, sku: consumer, quantity: 1 } });
    }
    return processed;
  };

/** Starts a fixture script as a real child process (TypeScript through tsx, workspace sources). */
export function startProcess(script: 'consumer-process' | 'relay-process', env: Record<string, string>): ChildProcess {
  const path = fileURLToPath(new URL(`./${script}.ts`, import.meta.url));
  return spawn(process.execPath, ['--conditions=development', '--import', 'tsx', path], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Resolves with the signal (or exit code) that ended the child. */
export function exited(child: ChildProcess): Promise<NodeJS.Signals | number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.signalCode ?? child.exitCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
}

/** Resolves once the child printed `line` on stdout. */
export function printed(child: ChildProcess, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(line)) resolve();
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`child exited (${signal ?? code}) before printing "${line}"`)),
    );
  });
}
