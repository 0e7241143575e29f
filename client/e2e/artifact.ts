// The library as a shop would get it: the tarball that `npm pack` makes of
// client/, unpacked, and served with a shop's page (shop.html) from a small
// static server on its own loopback port, another origin than chargeonce's.
// What the end-to-end tests load is the published artifact, not the
// library's sources.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './server.js';

const clientDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The newest modification time of the files under dir, in ms; 0 when there are none. */
function newest(dir: string): number {
  if (!existsSync(dir)) return 0;
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return latest;
}

/**
 * Builds client/dist when it is missing or older than client/src, so that
 * the packed artifact is the library as it stands.
 */
function ensureBuilt(): void {
  const built = join(clientDir, 'dist', 'index.js');
  const stale = existsSync(built) && newest(join(clientDir, 'src')) > statSync(built).mtimeMs;
  if (existsSync(built) && !stale) return;
  execFileSync(npm, ['run', 'build'], { cwd: clientDir, stdio: 'inherit' });
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

export interface Artifact {
  /** The unpacked package (its package.json, dist/ and whatever else it ships). */
  dir: string;
  /** The tarball's file name, e.g. chargeonce-client-1.0.0.tgz. */
  tarball: string;
  remove(): void;
}

/** Packs client/ with npm pack into a temporary directory and unpacks the tarball there. */
export function packClient(): Artifact {
  ensureBuilt();
  const tmp = mkdtempSync(join(tmpdir(), 'chargeonce-client-'));
  execFileSync(npm, ['pack', '--pack-destination', tmp, '--silent'], { cwd: clientDir, stdio: ['ignore', 'ignore', 'inherit'] });
  const tarball = readdirSync(tmp).find((f) => f.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack left no tarball in ${tmp}`);
  execFileSync('tar', ['-xzf', join(tmp, tarball), '-C', tmp]);
  const dir = join(tmp, 'package');
  if (!existsSync(join(dir, 'dist', 'index.js'))) {
    throw new Error(`the packed artifact ${tarball} has no dist/index.js: check "files" in client/package.json`);
  }
  return { dir, tarball, remove: () => rmSync(tmp, { recursive: true, force: true }) };
}

/** The shop's page: it imports the library from ./dist/index.js, as a page without a bundler does. */
export const testPagePath = join(dirname(fileURLToPath(import.meta.url)), 'shop.html');

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.ts': 'text/plain; charset=utf-8',
};

export interface Shop {
  origin: string;
  close(): Promise<void>;
}

/**
 * A shop's static site on its own loopback port: / is the test page, and
 * /dist/… the files of the packed artifact's dist/. Nothing else is served.
 */
export async function startShop(artifact: Artifact): Promise<Shop> {
  const dist = resolve(artifact.dir, 'dist');
  const page = readFileSync(testPagePath);
  const port = await freePort();
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://shop').pathname;
    const headers = { 'Cache-Control': 'no-store' };
    if (path === '/' || path === '/index.html') {
      res.writeHead(200, { ...headers, 'Content-Type': contentTypes['.html'] });
      res.end(page);
      return;
    }
    const file = normalize(join(dist, decodeURIComponent(path.slice('/dist/'.length))));
    if (!path.startsWith('/dist/') || !file.startsWith(dist + sep) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' });
      res.end('not found');
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': contentTypes[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', ok);
  });
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
