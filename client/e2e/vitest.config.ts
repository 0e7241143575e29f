import { defineConfig } from 'vitest/config';

// The end-to-end tests (`npm run test:e2e`): the packed tarball in real
// headless Chromium (Debian's), on a shop's page, against the real Go
// server with its own PostgreSQL. Without Chromium they are skipped with the
// reason, except under CI=true, where they fail.
export default defineConfig({
  test: {
    root: '.',
    include: ['e2e/**/*.e2e.ts'],
    globalSetup: ['e2e/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
