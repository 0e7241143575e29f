// The end-to-end tests' global setup: one server for the suite's files,
// whose URL each test reads with inject('baseURL'); without Chromium, the
// reason instead (inject('skipReason')), and no server. The demo's suite
// (web-demo/e2e/global-setup.ts) runs its own server through serveTests.
import type { TestProject } from 'vitest/node';
import { skipReason } from './env.js';
import { clientServer, type RunningServer } from './server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    baseURL: string;
    skipReason: string;
  }
}

/** What serveTests gives a suite's tests: TestProject's provide, for the two values it sets. */
export interface Provider {
  provide(key: 'baseURL' | 'skipReason', value: string): void;
}

/**
 * Starts the suite's server with start() and gives its tests the server's
 * URL; returns what stops it. Without Chromium it starts nothing and gives
 * the reason (under CI=true it throws instead: a missing Chromium fails).
 */
export async function serveTests(project: Provider, suite: string, start: () => Promise<RunningServer>): Promise<(() => Promise<void>) | undefined> {
  const skip = skipReason(); // throws under CI=true without Chromium
  if (skip) {
    console.warn(`\nSKIPPED: ${suite}: ${skip}.\n`);
    project.provide('skipReason', skip);
    project.provide('baseURL', '');
    return undefined;
  }
  const server = await start();
  console.log(`${suite}: chargeonce at ${server.url} (log: ${server.logPath})`);
  project.provide('skipReason', '');
  project.provide('baseURL', server.url);
  return () => server.stop();
}

export default function setup(project: TestProject) {
  return serveTests(project, '@chargeonce/client end-to-end tests', () => clientServer.startServer());
}
