import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { batchedLines } from './logger.js';

const messages = (write: string) =>
  write
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { msg: string }).msg);

describe('batchedLines', () => {
  it('writes info lines together once the first has waited, and a warning at once after the lines before it', async () => {
    const writes: string[] = [];
    const log = pino({ level: 'info' }, batchedLines({ write: (lines) => writes.push(lines) }, 50));
    const exitListeners = process.listenerCount('exit');

    log.info('first');
    log.info('second');
    expect(writes).toEqual([]);
    expect(process.listenerCount('exit')).toBe(exitListeners + 1); // what waits is written on exit
    await sleep(120);
    expect(writes.map(messages)).toEqual([['first', 'second']]);

    log.info('third');
    log.warn('a warning');
    expect(writes.map(messages)).toEqual([
      ['first', 'second'],
      ['third', 'a warning'],
    ]);
    log.error('an error');
    expect(writes.map(messages)).toHaveLength(3);
    await sleep(120);
    expect(writes).toHaveLength(3); // nothing left waiting
    expect(process.listenerCount('exit')).toBe(exitListeners);
  });

  it('writes what waits when the process exits', () => {
    const printed = execFileSync(
      process.execPath,
      [
        '--conditions=development',
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        "import { createLogger } from './logger.ts'; createLogger('test', 'info').info('last words'); process.exit(0);",
      ],
      { cwd: fileURLToPath(new URL('.', import.meta.url)), encoding: 'utf8' },
    );
    expect(messages(printed)).toEqual(['last words']);
  });
});
