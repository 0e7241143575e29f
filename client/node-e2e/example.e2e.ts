// examples/refund-lost-answer.mjs, run as a reader runs it, against the
// real server with the tests' merchant: its first answer lost, the same
// key sent again, the refund replayed, one refund at the provider.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { baseURL, secretKey, skip } from './chargeonce.js';

const script = join(import.meta.dirname, '..', 'examples', 'refund-lost-answer.mjs');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(skip !== '')('examples/refund-lost-answer.mjs', () => {
  it('charges, refunds with the first answer lost, and shows one key, a replayed refund and one refund at the provider', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'chargeonce-example-'));
    dirs.push(dir);
    const { stdout } = await promisify(execFile)(process.execPath, [script], {
      env: { ...process.env, CHARGEONCE_URL: baseURL, CHARGEONCE_SECRET_KEY: secretKey, CHARGEONCE_STORE: dir },
    });

    const [file] = readdirSync(dir);
    const record = JSON.parse(readFileSync(join(dir, file!), 'utf8')) as { key: string; status: string };
    expect(record.status).toBe('settled');
    const lines = stdout.split('\n');
    const sends = lines.filter((l) => l.startsWith('→ refundCharge'));
    expect(sends).toEqual([`→ refundCharge  key ${record.key.slice(0, 8)}…  try 1`, `→ refundCharge  key ${record.key.slice(0, 8)}…  try 2`]);
    expect(stdout).toContain(`kept before the first byte: refund:`);
    expect(stdout).toContain(`→ key ${record.key} (open)`);
    expect(lines).toContain('← no answer: terminated');
    expect(lines).toContain('← SUCCEEDED, replayed (HTTP 200)');
    expect(stdout).toMatch(/outcome: SUCCEEDED, refund \S+ of 25\.00 USD, key \S+, replayed true/);
    expect(stdout).toContain('answered from the store, no request');
    expect(stdout).toMatch(/the card provider holds 1 refund\(s\) of charge ch_\w+: re_\w+ succeeded 25\.00 USD/);
  });
});
