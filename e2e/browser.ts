import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

/** Chromium, driven by playwright-core (no browser download): Debian's, or the one CHROMIUM_PATH names. */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** What to do when there is no Chromium to drive; undefined when there is one. */
export function chromiumMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  return process.env.CHROMIUM_PATH
    ? `no Chromium at CHROMIUM_PATH=${CHROMIUM}: point it at a Chromium or Chrome binary`
    : `no Chromium at ${CHROMIUM}: apt-get install -y chromium (Debian, Ubuntu), or set CHROMIUM_PATH to a Chromium or Chrome binary`;
}

export function launchChromium(): Promise<Browser> {
  const missing = chromiumMissing();
  if (missing) throw new Error(missing);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * The README's picture of a duplicate suppressed, relative to the repository: the console test
 * takes it at that step every time it runs (exercises.ts), so it shows the console as it is.
 */
export const README_SCREENSHOT = 'docs/images/console-publish-twice.png';

/** Where the README's picture is written. */
export const readmeScreenshotPath = () => fileURLToPath(new URL(`../${README_SCREENSHOT}`, import.meta.url));

/** Where the browser tests save their screenshots (test artifacts, not committed). */
export async function screenshotPath(name: string): Promise<string> {
  const dir = fileURLToPath(new URL('../test-results/console/', import.meta.url));
  await mkdir(dir, { recursive: true });
  return join(dir, `${name}.png`);
}
