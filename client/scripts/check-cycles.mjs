// Fails when the sources import each other in a circle. Every relative
// import counts: a type-only one (`import type`), a re-export, and an
// import() of a file loaded later, since a reader follows each of them to
// find the bottom of the tree, and a circle has none. Each circle found is
// printed, every one of them (a file in several circles appears in each).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(process.argv[2] ?? 'src');
const specifier = /(?:\bimport|\bexport)\s+(?:type\s+)?(?:[\w*{}\s,$]+\s+from\s+)?['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g;
const files = (d) => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(d, e.name)) : e.name.endsWith('.ts') ? [join(d, e.name)] : []));

const all = files(root).sort();
const edges = new Map();
for (const f of all) {
  const text = readFileSync(f, 'utf8');
  const to = [...text.matchAll(specifier)].map((m) => resolve(dirname(f), (m[1] ?? m[2]).replace(/\.js$/, '.ts')));
  edges.set(f, [...new Set(to)]);
}

// Every simple circle, each found once: from its first file in sorted order,
// through files that come later only.
const circles = [];
all.forEach((start, i) => {
  const later = new Set(all.slice(i));
  const walk = (f, path) => {
    for (const to of edges.get(f) ?? []) {
      if (to === start) circles.push([...path, start].map((p) => relative(root, p)).join(' → '));
      else if (later.has(to) && !path.includes(to)) walk(to, [...path, to]);
    }
  };
  walk(start, [start]);
});

if (circles.length > 0) {
  console.error(`check:cycles: ${circles.length} import circle(s) in ${relative(process.cwd(), root)}/:\n  ${circles.join('\n  ')}`);
  process.exit(1);
}
console.log(`check:cycles: ${all.length} files in ${relative(process.cwd(), root)}/ import each other without a circle`);
