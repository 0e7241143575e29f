// Checks API.md, the public contract, against the declarations the package
// ships: for every entry of package.json's "exports", the names its
// dist/*.d.ts exports must be exactly the names API.md declares in that
// entry's section (a `## \`@chargeonce/client…\` (dist/….js)` heading, and
// the function, const, class, interface and type declarations of the ts
// blocks under it). A name exported but not in API.md, or in API.md but not
// exported, fails: the contract and the code cannot drift apart.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';

const root = resolve(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const api = readFileSync(join(root, 'API.md'), 'utf8');

/** API.md's sections by the dist file their heading names, with the names declared in their ts blocks. */
function documented() {
  const sections = new Map();
  let current = null;
  let inCode = false;
  for (const line of api.split('\n')) {
    const heading = /^## `(@chargeonce\/client[^`]*)` \((dist\/[\w/.-]+\.js)\)/.exec(line);
    if (heading) {
      current = new Set();
      sections.set(heading[2], { entry: heading[1], names: current });
      continue;
    }
    if (/^## /.test(line)) current = null;
    if (/^```/.test(line)) {
      inCode = !inCode && /^```ts/.test(line);
      continue;
    }
    if (!inCode || !current) continue;
    const decl = /^(?:export\s+)?(?:declare\s+)?(?:async\s+)?(function|const|class|interface|type)\s+([A-Za-z_$][\w$]*)/.exec(line);
    if (decl) current.add(decl[2]);
  }
  return sections;
}

/** The names dts exports, by the TypeScript compiler's reading of it. */
function exported(dts) {
  const program = ts.createProgram([dts], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const file = program.getSourceFile(dts);
  if (!file) throw new Error(`check:api: cannot read ${dts}`);
  const symbol = checker.getSymbolAtLocation(file);
  return new Set((symbol ? checker.getExportsOfModule(symbol) : []).map((s) => s.getName()));
}

const sections = documented();
const problems = [];
for (const [sub, target] of Object.entries(pkg.exports)) {
  if (typeof target !== 'object' || !target.types) continue;
  const js = target.default.replace(/^\.\//, '');
  const section = sections.get(js);
  const entry = `@chargeonce/client${sub === '.' ? '' : sub.slice(1)}`;
  if (!section) {
    problems.push(`${entry}: API.md has no section "## \`${entry}\` (${js})"`);
    continue;
  }
  const names = exported(join(root, target.types));
  for (const n of names) if (!section.names.has(n)) problems.push(`${entry}: ${n} is exported but API.md does not declare it`);
  for (const n of section.names) if (!names.has(n)) problems.push(`${entry}: API.md declares ${n}, which ${target.types} does not export`);
  sections.delete(js);
}
for (const [js, s] of sections) problems.push(`API.md documents ${s.entry} (${js}), which package.json does not export`);
if (problems.length > 0) {
  console.error(`check:api: API.md and the declarations disagree:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`check:api: API.md declares exactly what each of the ${Object.keys(pkg.exports).length - 1} entries exports`);
