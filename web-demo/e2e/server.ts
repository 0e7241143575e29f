// The demo's server for its browser tests and the screenshots: the shared
// starter of the end-to-end tests (client/e2e/server.ts), with its own
// PostgreSQL under .data/web-e2e, and the demo built in: `vite build` must
// have run, since the binary embeds web-demo/dist.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, testServer, type RunningServer } from '../../client/e2e/server';

export { freePort, repoRoot, type RunningServer } from '../../client/e2e/server';

const server = testServer('web-e2e');

/** Runs an operator command of the server binary against the demo's server's data. */
export const { runCLI } = server;

/** Starts the server with env on top of serverEnv's (see client/e2e/server.ts), and checks that it serves the demo. */
export async function startServer(env: Record<string, string> = {}, name = 'server'): Promise<RunningServer> {
  if (!process.env.CHARGEONCE_BIN && !existsSync(join(repoRoot, 'web-demo', 'dist', 'index.html'))) {
    throw new Error('web-demo/dist/index.html is missing: run `npm run build` (or `make web`) first');
  }
  const running = await server.startServer(env, name);
  const page = await fetch(`${running.url}/`);
  if (page.status !== 200) {
    await running.stop();
    throw new Error(`GET / answered ${page.status}: the binary has no demo built in; run \`npm run build\` first`);
  }
  return running;
}
