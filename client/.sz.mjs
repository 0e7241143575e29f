import * as esbuild from 'esbuild';
import { gzipSync } from 'zlib';
const lazy = ['sse.js', 'ws.js', 'stream.js', 'crosstab.js', 'lease.js', 'wake.js'];
const entry = process.argv[2] ?? 'export * from "./dist/index.js"';
const r = await esbuild.build({
  stdin: { contents: entry, resolveDir: process.cwd(), loader: 'js' },
  bundle: true, minify: true, format: 'esm', write: false, metafile: true,
  plugins: [{ name: 'x', setup(b) { b.onResolve({ filter: /^\.\/[\w-]+\.js$/ }, (a) => lazy.includes(a.path.slice(2)) ? { path: a.path, external: true } : undefined); } }],
});
const out = r.outputFiles[0].contents;
console.log('min', out.length, 'gzip', gzipSync(out, { level: 9 }).length);
const o = Object.values(r.metafile.outputs)[0];
for (const [f, v] of Object.entries(o.inputs).sort((a, b) => b[1].bytesInOutput - a[1].bytesInOutput)) console.log(v.bytesInOutput, f);
