import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Plugin, ProxyOptions } from 'vite';
import { defineConfig } from 'vitest/config';

// The Go server for `npm run dev`: `make run` (or `go run .`) serves it on :8080.
const backend = process.env.CHARGEONCE_URL ?? 'http://127.0.0.1:8080';

// The proxy to the Go server. A response that the server cuts short (the
// "lose the next response" fault) must reach the browser cut short too, with
// its headers, as the network error it is: by default the proxy would leave
// the browser waiting for the rest of the body forever.
const toBackend: ProxyOptions = {
  target: backend,
  configure(proxy) {
    proxy.on('proxyRes', (proxyRes, _req, res) => {
      proxyRes.on('close', () => {
        if (proxyRes.complete || !('flushHeaders' in res)) return;
        res.flushHeaders();
        res.socket?.destroySoon();
      });
    });
  },
};

// dist/ is embedded by webdemo.go, which needs dist/.gitkeep to compile on a
// fresh clone; Vite's own emptyOutDir would delete it.
function emptyDistKeepingGitkeep(): Plugin {
  return {
    name: 'empty-dist-keeping-gitkeep',
    apply: 'build',
    async buildStart() {
      const dist = join(import.meta.dirname, 'dist');
      const entries = await readdir(dist).catch(() => [] as string[]);
      await Promise.all(entries.filter((e) => e !== '.gitkeep').map((e) => rm(join(dist, e), { recursive: true, force: true })));
    },
  };
}

export default defineConfig({
  plugins: [emptyDistKeepingGitkeep()],
  build: {
    outDir: 'dist',
    emptyOutDir: false,
  },
  server: {
    port: 5173,
    strictPort: true,
    proxy: {
      '/graphql': toBackend,
      '/provider': toBackend,
      '/playground': toBackend,
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
