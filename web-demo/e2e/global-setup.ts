import type { TestProject } from 'vitest/node';
import { serveTests } from '../../client/e2e/global-setup';
import { startServer } from './server';

declare module 'vitest' {
  export interface ProvidedContext {
    baseURL: string;
    skipReason: string;
  }
}

export default function setup(project: TestProject) {
  return serveTests(project, 'browser tests', () => startServer());
}
