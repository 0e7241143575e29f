import { defineConfig } from 'vitest/config';

// The browser tests: real headless Chromium (Debian's), the real Go server,
// real PostgreSQL. `npm run test:e2e`, or `make test`.
export default defineConfig({
  test: {
    root: '.',
    include: ['e2e/**/*.e2e.ts'],
    globalSetup: ['e2e/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
