// The size budgets (npm run size). "core" is what a page downloads for
// `import { createCharger } from '@chargeonce/client'`: dist/index.js and
// every file it imports statically. The files the charger loads with
// import() only when they are needed are measured apart, each with what it
// brings beyond the core (the core's own files, already loaded, and the
// other lazy files, each measured on its own, are left out).
const lazy = ['sse.js', 'ws.js', 'stream.js', 'crosstab.js', 'wake.js'];

/** Leaves out the relative imports that take: a lazy file, or a core file, as the entry measures. */
const leaveOut = (take) => (config) => ({
  ...config,
  plugins: [
    ...(config.plugins ?? []),
    {
      name: 'leave-out',
      setup(build) {
        build.onResolve({ filter: /^\.\/[\w/-]+\.js$/ }, (args) =>
          take(args.path.slice(2)) ? { path: args.path, external: true } : undefined,
        );
      },
    },
  ],
});
const core = leaveOut((file) => lazy.includes(file));
/** Only files: the entry and the lazy files it brings with it. */
const only = (...files) => leaveOut((file) => !files.includes(file));

export default [
  { name: 'core (dist/index.js)', path: 'dist/index.js', import: '*', limit: '11 kB', gzip: true, modifyEsbuildConfig: core },
  { name: 'React hook (dist/react.js)', path: 'dist/react.js', import: '{ useCharge }', ignore: ['react'], limit: '1 kB', gzip: true },
  { name: 'Vue composable (dist/vue.js)', path: 'dist/vue.js', import: '{ useCharge }', ignore: ['vue'], limit: '0.5 kB', gzip: true },
  { name: 'lazy: server-sent events (dist/sse.js + stream.js)', path: 'dist/sse.js', import: '*', limit: '1 kB', gzip: true, modifyEsbuildConfig: only('sse.js', 'stream.js') },
  { name: 'lazy: websocket (dist/ws.js + stream.js)', path: 'dist/ws.js', import: '*', limit: '1 kB', gzip: true, modifyEsbuildConfig: only('ws.js', 'stream.js') },
  { name: 'lazy: cross-tab coordination (dist/crosstab.js)', path: 'dist/crosstab.js', import: '*', limit: '1.5 kB', gzip: true, modifyEsbuildConfig: only('crosstab.js') },
  { name: 'lazy: page events (dist/wake.js)', path: 'dist/wake.js', import: '*', limit: '0.5 kB', gzip: true, modifyEsbuildConfig: only('wake.js') },
];
