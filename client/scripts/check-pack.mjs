// Packs the package as npm would publish it and checks the tarball with
// Are the Types Wrong (attw) under its esm-only profile: this package is
// ESM only, so the one rule that profile leaves out is that a CommonJS
// require() resolves. Then it checks the tarball holds dist/ and nothing
// of the sources or tests.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const out = mkdtempSync(join(tmpdir(), 'chargeonce-client-pack-'));
try {
  const [info] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', out], { encoding: 'utf8' }));
  const files = info.files.map((f) => f.path);
  const stray = files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'API.md', 'LICENSE'].includes(f));
  if (stray.length > 0 || files.some((f) => f.endsWith('.test.js'))) {
    console.error(`check:pack: unexpected files in the tarball: ${stray.join(', ')}`);
    process.exit(1);
  }
  for (const need of ['dist/index.js', 'dist/index.d.ts', 'dist/react.js', 'dist/react.d.ts']) {
    if (!files.includes(need)) {
      console.error(`check:pack: ${need} is missing from the tarball; run npm run build first`);
      process.exit(1);
    }
  }
  console.log(`check:pack: ${info.filename}, ${files.length} files, ${info.size} bytes packed`);
  execFileSync('npx', ['--no-install', 'attw', join(out, info.filename), '--profile', 'esm-only', '--format', 'table'], { stdio: 'inherit' });
} finally {
  rmSync(out, { recursive: true, force: true });
}
