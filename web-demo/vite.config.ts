import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Plugin, ProxyOptions } from 'vite';
import { defineConfig } from 'vitest/config';

// The Go server for `npm run dev`: `make run` (or `go run . serve`) serves it on :8080.
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
    // Two pages: the checkout, and the GraphQL playground that the server
    // serves at /playground (webdemo.go fills in its config).
    rolldownOptions: {
      input: {
        checkout: join(import.meta.dirname, 'index.html'),
        playground: join(import.meta.dirname, 'playground.html'),
      },
      // GraphiQL's React modules start with "use client" or "use no memo",
      // directives for server rendering and the React compiler that mean
      // nothing in a browser bundle: a hundred warnings of no use.
      onwarn(warning, warn) {
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
    // The playground's editor (Monaco) is one chunk of about 2.8 MB, loaded
    // by /playground only and served from the binary: no CDN, no size budget.
    chunkSizeWarningLimit: 3_000,
  },
  // Monaco's workers (the playground's editors) import ES modules.
  worker: { format: 'es' },
  server: {
    port: 5173,
    strictPort: true,
    proxy: {
      // ws: the live status subscription (chargeUpdated) is a websocket on /graphql.
      '/graphql': { ...toBackend, ws: true },
      '/provider': toBackend,
      // The shop's backend: the checkout session the page pays.
      '/demo': toBackend,
      // The Go server's playground page, and the built assets it loads.
      '/playground': toBackend,
      '/assets': toBackend,
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
