// Packs the package as npm would publish it and checks the tarball with
// publint (in strict mode: its warnings fail too) and with Are the Types
// Wrong (attw) under its esm-only profile: this package is ESM only, so the
// one rule that profile leaves out is that a CommonJS require() resolves. Then it checks the tarball holds dist/ and nothing
// of the sources or tests, and that it installs into an empty project where
// `import { createCharger } from '@chargeonce/client'` and a merchant's
// server's `import { createMerchant } from '@chargeonce/client/server'`
// type-check, and the server entry loads in Node.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const out = mkdtempSync(join(tmpdir(), 'chargeonce-client-pack-'));
try {
  const [info] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', out], { encoding: 'utf8' }));
  const files = info.files.map((f) => f.path);
  const stray = files.filter((f) => !f.startsWith('dist/') && !['package.json', 'README.md', 'API.md', 'LICENSE'].includes(f));
  if (stray.length > 0 || files.some((f) => f.endsWith('.test.js'))) {
    console.error(`check:pack: unexpected files in the tarball: ${stray.join(', ')}`);
    process.exit(1);
  }
  for (const need of ['dist/index.js', 'dist/index.d.ts', 'dist/react.js', 'dist/react.d.ts', 'dist/vue.js', 'dist/vue.d.ts', 'dist/server.js', 'dist/server.d.ts', 'dist/filestore.js']) {
    if (!files.includes(need)) {
      console.error(`check:pack: ${need} is missing from the tarball; run npm run build first`);
      process.exit(1);
    }
  }
  console.log(`check:pack: ${info.filename}, ${files.length} files, ${info.size} bytes packed`);
  execFileSync('npx', ['--no-install', 'publint', join(out, info.filename), '--strict'], { stdio: 'inherit' });
  execFileSync('npx', ['--no-install', 'attw', join(out, info.filename), '--profile', 'esm-only', '--format', 'table'], { stdio: 'inherit' });
  installs(join(out, info.filename), join(out, 'project'));
} finally {
  rmSync(out, { recursive: true, force: true });
}

// installs installs the tarball into an empty ESM project and type-checks a
// checkout page's use of it with this package's TypeScript.
function installs(tarball, dir) {
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'empty-checkout', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', tarball], { cwd: dir, stdio: 'inherit' });
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM'], types: [] },
    files: ['checkout.ts', 'server.ts'],
  }));
  writeFileSync(join(dir, 'checkout.ts'), [
    "import { createCharger, ChargeRejectedError, UnknownOutcomeError, type Charger } from '@chargeonce/client';",
    "const charger: Charger = createCharger({ endpoint: 'https://api.example/graphql', publishableKey: 'co_pk_x', session: 'cs_x' });",
    'const off = charger.subscribe((state) => console.log(state.kind));',
    "charger.pay({ paymentMethod: 'pm_card_visa' }).then((o) => console.log(o.status, o.key), (e: unknown) => {",
    '  if (e instanceof ChargeRejectedError) console.log(e.code, e.key);',
    '  else if (e instanceof UnknownOutcomeError) console.log(e.key);',
    '});',
    'off();',
    '',
  ].join('\n'));
  writeFileSync(join(dir, 'server.ts'), [
    "import { createMerchant, fileKeyStore, OperationRejectedError, OperationUnknownError, type RefundOutcome } from '@chargeonce/client/server';",
    "const merchant = createMerchant({ endpoint: 'https://api.example/graphql', secretKey: 'co_sk_x', store: fileKeyStore('/var/lib/shop/chargeonce') });",
    "merchant.refundCharge('refund:order-42', { chargeId: 'ch_1' }).then((o: RefundOutcome) => console.log(o.status === 'SUCCEEDED' ? o.refund.id : o.failure.code), (e: unknown) => {",
    '  if (e instanceof OperationRejectedError) console.log(e.code, e.key);',
    '  else if (e instanceof OperationUnknownError) console.log(e.key);',
    '});',
    '',
  ].join('\n'));
  execFileSync(resolve('node_modules/.bin/tsc'), ['-p', dir], { stdio: 'inherit' });
  execFileSync(process.execPath, ['--input-type=module', '-e', "const s = await import('@chargeonce/client/server'); if (typeof s.createMerchant !== 'function' || typeof s.fileKeyStore !== 'function') process.exit(1);"], { cwd: dir, stdio: 'inherit' });
  console.log('check:pack: the tarball installs into an empty project, its imports type-check, and the server entry loads in Node');
}
