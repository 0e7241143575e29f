// Where the browser tests find Chromium, and what to do without it; the
// end-to-end tests (e2e/env.ts, and through it the demo's) follow the same
// rule from here. Read by vitest.browser.config.ts in Node; the tests
// themselves run in the page.
import { accessSync, constants } from 'node:fs';

/** Debian's Chromium (apt-get install chromium); CHROMIUM_PATH overrides. */
export const chromiumPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** Headless Chromium on a machine without a desktop, sandbox or outside network. */
export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function chromiumAvailable(): boolean {
  try {
    accessSync(chromiumPath, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Why the browser tests are skipped, or null when they run. Throws under CI. */
export function skipReason(): string | null {
  if (chromiumAvailable()) return null;
  const why = `Chromium not found at ${chromiumPath}: install it with 'apt-get install chromium' (or set CHROMIUM_PATH)`;
  if (process.env.CI === 'true') throw new Error(`${why}. CI=true: the browser tests are required.`);
  return why;
}
