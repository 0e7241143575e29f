// The browser tests (browser/*.browser.test.ts): Vitest's browser mode in
// headless Chromium, Debian's own (no browser is downloaded). Without it
// they are skipped, with the reason, except under CI=true, where
// skipReason() throws.
import { playwright } from '@vitest/browser-playwright';
import { defineConfig } from 'vitest/config';
import { chromiumArgs, chromiumPath, skipReason } from './browser/chromium.js';

const skipped = skipReason();
if (skipped) console.warn(`browser tests skipped: ${skipped}`);

export default defineConfig({
  // Vue's feature flags, which its esm-bundler build expects from the
  // bundler: the composable's test needs neither the options API nor devtools.
  define: { __VUE_OPTIONS_API__: 'false', __VUE_PROD_DEVTOOLS__: 'false', __VUE_PROD_HYDRATION_MISMATCH_DETAILS__: 'false' },
  // Bundled before the first test, so that finding it mid-run reloads no page.
  optimizeDeps: { include: ['vue'] },
  test: {
    include: skipped ? [] : ['browser/**/*.browser.test.ts'],
    passWithNoTests: !!skipped,
    testTimeout: 5_000,
    browser: {
      enabled: !skipped,
      headless: true,
      provider: playwright({ launchOptions: { executablePath: chromiumPath, args: chromiumArgs } }),
      instances: [{ browser: 'chromium' }],
      // The tests drive the page's APIs, not its pixels.
      screenshotFailures: false,
    },
  },
});
