// Starts the real chargeonce server for the end-to-end tests: the Go binary
// built from this checkout, on a free port, with its own PostgreSQL under the
// data directory of the suite that starts it, which the server starts and, on
// SIGTERM, stops. The tests run the same binary's operator commands against
// the same data (runCLI). The library's tests (client/e2e) and the demo's
// (web-demo/e2e) each start theirs in a directory of their own, so that the
// two suites never share a database, even when they run at the same time.
//
// Nothing here imports vitest or playwright: the demo's suite imports this
// file, and a second copy of either, resolved from client/node_modules,
// would not be the one running its tests.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

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

/** A suite's server: its binary, its environment, its operator commands, and the server itself, all under one data directory. */
export interface TestServer {
  /** DATA_DIR: the PostgreSQL, the logs and the binary of this suite's servers. */
  dataDir: string;
  /** The server binary: CHARGEONCE_BIN, or the one that startServer builds. */
  binaryPath(): string;
  /**
   * The environment of the suite's server, and of the operator commands run
   * beside it: the same DATA_DIR, hence the same PostgreSQL (its own, never
   * a developer's DATABASE_URL).
   */
  serverEnv(env?: Record<string, string>): Record<string, string>;
  /** Runs an operator command of the server binary (e.g. merchant origins add) against the suite's data; its output. */
  runCLI(args: string[]): string;
  /**
   * Starts the server with env on top of serverEnv's. name names its log
   * (DATA_DIR/<name>.log), so that a second server beside the shared one,
   * e.g. with tighter limits, keeps a log of its own.
   */
  startServer(env?: Record<string, string>, name?: string): Promise<RunningServer>;
}

/** The server of a suite whose data lives in .data/<name> at the repository's root. */
export function testServer(name: string): TestServer {
  const dataDir = join(repoRoot, '.data', name);

  const binaryPath = () => (process.env.CHARGEONCE_BIN ? resolve(process.env.CHARGEONCE_BIN) : join(dataDir, 'chargeonce'));

  /** Builds the server binary, unless CHARGEONCE_BIN names one. */
  const binary = () => {
    if (process.env.CHARGEONCE_BIN) return binaryPath();
    mkdirSync(dataDir, { recursive: true });
    const bin = binaryPath();
    execFileSync(process.env.GO ?? 'go', ['build', '-o', bin, '.'], { cwd: repoRoot, stdio: 'inherit' });
    return bin;
  };

  const serverEnv = (env: Record<string, string> = {}): Record<string, string> => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/root',
    APP_ENV: 'development',
    DATA_DIR: dataDir,
    // Its own embedded event broker on a free port: never a developer's
    // (make run's, on 4223), whose stream belongs to another database.
    EMBEDDED_NATS_PORT: '0',
    SIM_SLOW_DELAY: '2s',
    ...env,
  });

  const runCLI = (args: string[]): string =>
    execFileSync(binaryPath(), args, { cwd: repoRoot, env: serverEnv(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  async function startServer(env: Record<string, string> = {}, name = 'server'): Promise<RunningServer> {
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
    return { url, logPath, stop };
  }

  return { dataDir, binaryPath, serverEnv, runCLI, startServer };
}

/** The library's own suite's server (client/e2e), under .data/client-e2e. */
export const clientServer = testServer('client-e2e');
