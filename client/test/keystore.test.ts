// The key stores: the file store (one JSON file per name, written to a
// temporary file, fsynced, then renamed or linked), the memory store and
// the Web Storage one, against one list of cases; then what a crash leaves
// in the file store's directory.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fileKeyStore, fileName } from '../src/filestore.js';
import { memoryKeyStore, storageKeyStore, type KeyStore } from '../src/keystore.js';
import { merchantOperations } from '../src/merchant.js';
import { createRunner } from '../src/runner.js';
import { FakeMerchantServer } from './fake-merchant.js';
import { MemoryStorage } from './fakes.js';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'chargeonce-keystore-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const stores: [string, () => KeyStore][] = [
  ['fileKeyStore', () => fileKeyStore(join(tempDir(), 'records'))],
  ['memoryKeyStore', () => memoryKeyStore()],
  ['storageKeyStore', () => storageKeyStore(new MemoryStorage())],
];

describe.each(stores)('%s', (_, make) => {
  it('holds nothing until told, then what it was told', async () => {
    const s = make();
    await expect(s.get('refund:order-42')).resolves.toBeNull();
    await s.set('refund:order-42', '{"a":1}');
    await expect(s.get('refund:order-42')).resolves.toBe('{"a":1}');
    await s.set('refund:order-42', '{"a":2}');
    await expect(s.get('refund:order-42')).resolves.toBe('{"a":2}');
    await s.delete('refund:order-42');
    await expect(s.get('refund:order-42')).resolves.toBeNull();
    await s.delete('refund:order-42'); // nothing there: no error
  });

  it('create() stores only into an empty name, and says whether it did', async () => {
    const s = make();
    await expect(s.create('n', 'first')).resolves.toBe(true);
    await expect(s.create('n', 'second')).resolves.toBe(false);
    await expect(s.get('n')).resolves.toBe('first');
  });

  it('of many creates of one name at once, one wins', async () => {
    const s = make();
    const won = await Promise.all(Array.from({ length: 20 }, (_, i) => s.create('n', `v${i}`)));
    expect(won.filter(Boolean)).toHaveLength(1);
    await expect(s.get('n')).resolves.toBe(`v${won.indexOf(true)}`);
  });

  it('keeps names apart that differ only in what a file name would not hold', async () => {
    const s = make();
    await s.set('a/b', '1');
    await s.set('a:b', '2');
    await s.set('.hidden', '3');
    await s.set('..', '4');
    await expect(Promise.all(['a/b', 'a:b', '.hidden', '..'].map((n) => s.get(n)))).resolves.toEqual(['1', '2', '3', '4']);
  });
});

describe('fileKeyStore on disk', () => {
  it('one JSON file per name, its name percent-encoded, and no temporary file left behind', async () => {
    const dir = join(tempDir(), 'records');
    const s = fileKeyStore(dir);
    await s.create('refund:order-42', '{"key":"k1"}');
    await s.set('capture/7', '{"key":"k2"}');
    expect(readdirSync(dir).sort()).toEqual(['capture%2F7.json', 'refund%3Aorder-42.json']);
    expect(readFileSync(join(dir, 'refund%3Aorder-42.json'), 'utf8')).toBe('{"key":"k1"}');
  });

  it("a torn temporary file, as a writer killed mid-write leaves it, is never read; the record stays the last one written", async () => {
    const dir = join(tempDir(), 'records');
    const s = fileKeyStore(dir);
    await s.set('refund:order-42', '{"key":"k1","status":"open"}');
    // What a kill -9 between write and rename leaves: a half-written temporary file.
    writeFileSync(join(dir, '.5f0c2d7e-torn.tmp'), '{"key":"k1","status":"sett');

    await expect(s.get('refund:order-42')).resolves.toBe('{"key":"k1","status":"open"}');
    await s.set('refund:order-42', '{"key":"k1","status":"settled"}');
    await expect(fileKeyStore(dir).get('refund:order-42')).resolves.toBe('{"key":"k1","status":"settled"}');
  });

  it('a runner on a directory with a torn temporary file resumes the record with its key', async () => {
    const dir = join(tempDir(), 'records');
    const server = new FakeMerchantServer();
    const ops = merchantOperations({ fetch: server.fetch, endpoint: 'http://x/graphql', headers: {}, timeoutMs: 1000, now: Date.now });
    const clock = { now: Date.now, sleep: async () => {} };
    server.script = ['lose-after', 'network'];
    await expect(createRunner({ store: fileKeyStore(dir), clock, retry: { maxAttempts: 2 }, mintKey: () => 'k1' }).run(ops.refundCharge, 'r', { chargeId: 'ch_1' })).rejects.toThrow(/unknown/);
    writeFileSync(join(dir, '.0000-torn.tmp'), '{"v":1,"key":"k9"');

    const outcome = await createRunner({ store: fileKeyStore(dir), clock, mintKey: () => 'k2' }).run(ops.refundCharge, 'r', { chargeId: 'ch_1' });

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'k1', replayed: true });
    expect(new Set(server.sent.map((x) => x.key))).toEqual(new Set(['k1']));
  });

  it('refuses an empty name and one too long for a file name', () => {
    expect(() => fileName('')).toThrow(RangeError);
    expect(() => fileName('x'.repeat(201))).toThrow(RangeError);
    expect(fileName('x'.repeat(200))).toBe(`${'x'.repeat(200)}.json`);
  });
});
