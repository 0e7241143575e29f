// Where the browser tests find Chromium, and what to do without it: the
// rule of the client library's own browser tests (client/browser).
import { chromiumArgs as libraryArgs } from '../../client/browser/chromium';

export { chromiumAvailable, chromiumPath, skipReason } from '../../client/browser/chromium';

/**
 * The flags for headless Chromium on a machine without a desktop, sandbox
 * or outside network (the library's tests use the same): no GPU, no QUIC,
 * and none of the background requests that a closed network refuses.
 */
export const chromiumArgs = ['--headless', ...libraryArgs];
