// Starts the real chargeonce server once for the Node tests (the binary
// built from this checkout, its own PostgreSQL, APP_ENV=development, whose
// devfault drops an answer on request), and creates a merchant of their
// own with the operator CLI, as an operator would: its secret key is what
// the tests' merchant's server holds.
import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { testServer } from '../e2e/server.js';

/** The Node tests' server, under .data/client-node-e2e: a database of their own. */
const suite = testServer('client-node-e2e');

declare module 'vitest' {
  export interface ProvidedContext {
    baseURL: string;
    merchant: string;
    secretKey: string;
    skipReason: string;
  }
}

/** Why the tests cannot run here (no Go to build the server), or ''. Throws under CI=true. */
function skipReason(): string {
  if (process.env.CHARGEONCE_BIN) return '';
  try {
    execFileSync(process.env.GO ?? 'go', ['version'], { stdio: 'ignore' });
    return '';
  } catch {
    const why = 'no Go toolchain to build the chargeonce server (or set CHARGEONCE_BIN)';
    if (process.env.CI === 'true') throw new Error(`${why}. CI=true: the Node tests against the server are required.`);
    return why;
  }
}

export default async function setup(project: TestProject) {
  const skip = skipReason();
  project.provide('skipReason', skip);
  if (skip) {
    console.warn(`\nSKIPPED: the Node tests against chargeonce: ${skip}.\n`);
    for (const k of ['baseURL', 'merchant', 'secretKey'] as const) project.provide(k, '');
    return;
  }
  const server = await suite.startServer({}, 'node-e2e');
  console.log(`node tests: chargeonce at ${server.url} (log: ${server.logPath})`);
  const merchant = `runner-${Date.now().toString(36)}`;
  const secretKey = /co_sk_\S+/.exec(suite.runCLI(['apikey', 'create', merchant]))?.[0];
  if (!secretKey) {
    await server.stop();
    throw new Error('apikey create printed no secret key');
  }
  project.provide('baseURL', server.url);
  project.provide('merchant', merchant);
  project.provide('secretKey', secretKey);
  return () => server.stop();
}
