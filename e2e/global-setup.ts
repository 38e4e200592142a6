// Before the browser tests: a Chromium to drive, or `pnpm test` says how to get one instead of
// failing in the middle of the run.
import { chromiumMissing } from './browser.js';

export default function checkChromium(): void {
  const missing = chromiumMissing();
  if (!missing) return;
  console.error(`\nThe browser tests need Chromium — ${missing}.\n`);
  process.exit(1);
}
