// Fails when a file in dist/ imports anything but its siblings by a
// relative path with the .js extension: a page loads dist/index.js as a
// module with no bundler, where a bare specifier ('some-package') or a
// Node built-in ('node:…') does not resolve. The exceptions: the React
// and Vue entries, which import their optional peer dependency ('react',
// 'vue') and nothing else bare, and the file store of the server entry
// (filestore.js), Node's own; the browser's entries (index.js, react.js,
// vue.js) must not reach it, statically or by import().
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const dir = process.argv[2] ?? 'dist';
const nodeOnly = ['node:crypto', 'node:fs/promises', 'node:path'];
const allowed = { 'react.js': ['react'], 'react.d.ts': ['react'], 'vue.js': ['vue'], 'vue.d.ts': ['vue'], 'filestore.js': nodeOnly };
const browserEntries = ['index.js', 'react.js', 'vue.js'];
const specifier = /(?:\bimport|\bexport)\s*(?:type\s+)?(?:[\w*{}\s,$]+\s+from\s+)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function files(d) {
  return readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(d, e.name)) : [join(d, e.name)]));
}

let checked = 0;
const bad = [];
const imports = new Map();
for (const f of files(dir).filter((f) => f.endsWith('.js') || f.endsWith('.d.ts'))) {
  checked++;
  const name = relative(dir, f);
  const text = readFileSync(f, 'utf8');
  imports.set(name, []);
  for (const m of text.matchAll(specifier)) {
    const spec = m[1] ?? m[2];
    if (spec.startsWith('./')) imports.get(name).push(spec.slice(2));
    const relativeJs = (spec.startsWith('./') || spec.startsWith('../')) && spec.endsWith('.js');
    if (!relativeJs && !(allowed[name] ?? []).includes(spec)) bad.push(`${name}: ${spec}`);
  }
}
if (checked === 0) {
  console.error(`check:imports: no files in ${dir}; run npm run build first`);
  process.exit(1);
}
// What a page can load from its entries: none of it may be Node's.
for (const entry of browserEntries) {
  const seen = new Set();
  const walk = (f) => {
    if (seen.has(f) || !imports.has(f)) return;
    seen.add(f);
    if (allowed[f] === nodeOnly) bad.push(`${f}: Node only, reached from ${entry}`);
    imports.get(f).forEach(walk);
  };
  walk(entry);
}
if (bad.length > 0) {
  console.error(`check:imports: specifiers that a browser cannot load without a bundler:\n  ${bad.join('\n  ')}`);
  process.exit(1);
}
console.log(`check:imports: ${checked} files in ${dir}/ import only each other by relative .js paths (react.js: 'react', vue.js: 'vue'; filestore.js: Node's, out of the browser entries' reach)`);
