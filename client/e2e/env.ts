// Where the end-to-end tests find Chromium, and what to do without it: the
// rule of the library's browser tests (browser/chromium.ts). The demo's
// browser tests (web-demo/e2e) launch it from here too.
import { chromiumArgs as browserTestArgs } from '../browser/chromium.js';

export { chromiumAvailable, chromiumPath, skipReason } from '../browser/chromium.js';

/**
 * The flags for headless Chromium on a machine without a desktop, sandbox
 * or outside network (the browser tests use the same): no GPU, no QUIC,
 * and none of the background requests that a closed network refuses.
 */
export const chromiumArgs = ['--headless', ...browserTestArgs];
