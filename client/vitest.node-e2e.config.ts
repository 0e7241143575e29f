import { defineConfig } from 'vitest/config';

// The merchant's server's operations (@chargeonce/client/server) in Node
// against the real chargeonce server, its PostgreSQL and card simulator:
// `npm run test:node-e2e`, or `make test-web`.
export default defineConfig({
  test: {
    root: '.',
    include: ['node-e2e/**/*.e2e.ts'],
    globalSetup: ['node-e2e/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
