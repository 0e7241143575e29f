import type { TestProject } from 'vitest/node';
import { skipReason } from './env';
import { startServer } from './server';

declare module 'vitest' {
  export interface ProvidedContext {
    baseURL: string;
    skipReason: string;
  }
}

export default async function setup(project: TestProject) {
  const skip = skipReason(); // throws under CI=true without Chromium
  if (skip) {
    console.warn(`\nSKIPPED: browser tests: ${skip}.\n`);
    project.provide('skipReason', skip);
    project.provide('baseURL', '');
    return;
  }
  const server = await startServer();
  console.log(`browser tests: chargeonce at ${server.url} (log: ${server.logPath})`);
  project.provide('skipReason', '');
  project.provide('baseURL', server.url);
  return () => server.stop();
}
