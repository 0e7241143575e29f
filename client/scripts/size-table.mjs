// The core's size file by file: what each file of dist/ brings to what a
// page downloads for `import { createCharger } from '@chargeonce/client'`
// (dist/index.js and its static imports, minified by esbuild as
// size-limit measures them; the files loaded later with import() left
// out). Gzip works on the whole, so the files' minified bytes are given,
// with the gzipped total of the core beside them. `npm run size:table`
// prints the table; with --check it fails unless README.md holds it, as it
// is, between its size-table markers (npm run check runs that).
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const root = resolve(import.meta.dirname, '..');
const lazy = new Set(['sse.js', 'ws.js', 'stream.js', 'crosstab.js', 'wake.js']);

const result = await build({
  entryPoints: [join(root, 'dist', 'index.js')],
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  write: false,
  metafile: true,
  plugins: [
    {
      name: 'lazy-apart',
      setup(b) {
        b.onResolve({ filter: /^\.\/[\w-]+\.js$/ }, (args) => (args.kind === 'dynamic-import' && lazy.has(args.path.slice(2)) ? { path: args.path, external: true } : undefined));
      },
    },
  ],
});
const [output] = Object.values(result.metafile.outputs);
const gzip = gzipSync(result.outputFiles[0].contents).length;
const files = Object.entries(output.inputs)
  .map(([path, v]) => ({ file: path.slice(path.indexOf('dist/') + 'dist/'.length), bytes: v.bytesInOutput }))
  .filter((f) => f.bytes > 0)
  .sort((a, b) => b.bytes - a.bytes || a.file.localeCompare(b.file));
const total = files.reduce((n, f) => n + f.bytes, 0);
const table = [
  '| file (dist/) | minified bytes | share |',
  '|---|---:|---:|',
  ...files.map((f) => `| \`${f.file}\` | ${f.bytes} | ${((100 * f.bytes) / total).toFixed(1)}% |`),
  `| **core** | **${total}** minified, **${gzip}** gzipped | 100% |`,
].join('\n');

if (!process.argv.includes('--check')) {
  console.log(table);
  process.exit(0);
}
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const open = '<!-- size-table -->\n';
const close = '\n<!-- /size-table -->';
const at = readme.indexOf(open);
const end = readme.indexOf(close);
if (at < 0 || end < at) {
  console.error('size:table: README.md has no <!-- size-table --> … <!-- /size-table --> block');
  process.exit(1);
}
if (readme.slice(at + open.length, end) !== table) {
  if (process.argv.includes('--write')) {
    writeFileSync(join(root, 'README.md'), readme.slice(0, at + open.length) + table + readme.slice(end));
    console.log('size:table: README.md updated');
    process.exit(0);
  }
  console.error(`size:table: README.md's table of the core is stale; run npm run size:table -- --check --write. Now:\n${table}`);
  process.exit(1);
}
console.log(`size:table: README.md's table of the core is current (${files.length} files, ${gzip} B gzipped)`);
