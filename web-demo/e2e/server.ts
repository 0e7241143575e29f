// Starts the real chargeonce server for the browser tests and the
// screenshots: the Go binary built from this checkout (with the demo embedded,
// so `vite build` must have run), on a free port, with its own PostgreSQL
// under .data/web-e2e that it starts and, on SIGTERM, stops. The tests run the
// same binary's operator commands against the same data (runCLI).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dataDir = join(repoRoot, '.data', 'web-e2e');

export interface RunningServer {
  url: string;
  logPath: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

/** The server binary: CHARGEONCE_BIN, or the one that startServer builds. */
export function binaryPath(): string {
  return process.env.CHARGEONCE_BIN ? resolve(process.env.CHARGEONCE_BIN) : join(dataDir, 'chargeonce');
}

/** Builds the server binary, unless CHARGEONCE_BIN names one. */
function binary(): string {
  if (process.env.CHARGEONCE_BIN) return binaryPath();
  if (!existsSync(join(repoRoot, 'web-demo', 'dist', 'index.html'))) {
    throw new Error('web-demo/dist/index.html is missing: run `npm run build` (or `make web`) first');
  }
  mkdirSync(dataDir, { recursive: true });
  const bin = binaryPath();
  execFileSync(process.env.GO ?? 'go', ['build', '-o', bin, '.'], { cwd: repoRoot, stdio: 'inherit' });
  return bin;
}

/**
 * The environment of the browser tests' server, and of the operator
 * commands run beside it: the same DATA_DIR, hence the same PostgreSQL (its
 * own, never a developer's DATABASE_URL).
 */
export function serverEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/root',
    APP_ENV: 'development',
    DATA_DIR: dataDir,
    // Its own embedded event broker on a free port: never a developer's
    // (make run's, on 4223), whose stream belongs to another database.
    EMBEDDED_NATS_PORT: '0',
    SIM_SLOW_DELAY: '2s',
    ...env,
  };
}

/** Runs an operator command of the server binary (e.g. merchant origins add) against the tests' server's data; its output. */
export function runCLI(args: string[]): string {
  return execFileSync(binaryPath(), args, { cwd: repoRoot, env: serverEnv(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Starts the server with env on top of serverEnv's. name names its log
 * (DATA_DIR/<name>.log), so that a second server beside the shared one,
 * e.g. with tighter limits, keeps a log of its own.
 */
export async function startServer(env: Record<string, string> = {}, name = 'server'): Promise<RunningServer> {
  const bin = binary();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  mkdirSync(dataDir, { recursive: true });
  const logPath = join(dataDir, `${name}.log`);
  const log = createWriteStream(logPath);
  const child: ChildProcess = spawn(bin, ['serve'], {
    cwd: repoRoot,
    env: serverEnv({ PORT: String(port), ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 45_000);
      await exited;
      clearTimeout(killer);
    }
    log.end();
  };

  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`chargeonce exited with ${child.exitCode} before it was ready; see ${logPath}`);
    }
    try {
      const res = await fetch(`${url}/readyz`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`chargeonce was not ready within 90s; see ${logPath}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const page = await fetch(`${url}/`);
  if (page.status !== 200) {
    await stop();
    throw new Error(`GET / answered ${page.status}: the binary has no demo built in; run \`npm run build\` first`);
  }
  return { url, logPath, stop };
}
