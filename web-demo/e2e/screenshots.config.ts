import { defineConfig } from 'vitest/config';

// `npm run screenshots`: the README's screenshots, taken by Playwright in
// headless Chromium against the real server (same setup as the browser tests).
export default defineConfig({
  test: {
    root: '.',
    include: ['e2e/screenshots.ts'],
    globalSetup: ['e2e/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
