// A merchant's server killed between two retries of a refund and started
// again on the same file store: two real Node processes running the built
// package, against the real server. The first sends the refund, whose
// answer is lost, and is killed with SIGKILL while it waits to retry; the
// second finds the record open, asks refundStatus about the same key, and
// ends with the refund the first one made: one key, one refund at the
// provider.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunnerEvent } from '../src/server.js';
import { atProvider, charge, chargeRecord, endpoint, secretKey, skip } from './chargeonce.js';

const script = join(import.meta.dirname, 'refund-process.mjs');
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Line {
  event?: RunnerEvent;
  outcome?: { status: string; key: string; replayed: boolean; refund?: { chargeId: string; amount: number } };
  error?: { name: string; message: string };
}

/** Starts the refund process; lines yields what it prints, exited resolves with its exit code and signal. */
function refundProcess(dir: string, chargeId: string, mode: 'lose-every-answer' | 'normal') {
  const child = spawn(process.execPath, [script, endpoint, secretKey, dir, chargeId, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) => child.once('exit', (code, signal) => ok({ code, signal })));
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    child,
    exited,
    /** The lines up to and including the first that until accepts. */
    async readUntil(until: (l: Line) => boolean): Promise<Line[]> {
      const seen: Line[] = [];
      for (;;) {
        const next = await lines.next();
        if (next.done) throw new Error(`the process ended before the awaited line; it printed ${JSON.stringify(seen)}`);
        const l = JSON.parse(next.value) as Line;
        seen.push(l);
        if (until(l)) return seen;
      }
    },
  };
}

describe.skipIf(skip !== '')('a process killed between two retries, restarted on the same file store', () => {
  it('the second process uses the stored key, gets the refund the first made (replayed), and the provider holds one', async () => {
    const c = await charge('AUTOMATIC', 1700);
    const dir = mkdtempSync(join(tmpdir(), 'chargeonce-restart-'));
    dirs.push(dir);
    const recordFile = join(dir, `${encodeURIComponent(`refund:${c.id}`)}.json`);

    // The first process: its refund reaches the server, the answer is lost; it waits minutes to retry.
    const first = refundProcess(dir, c.id, 'lose-every-answer');
    const before = await first.readUntil((l) => l.event?.type === 'retry');
    const key = before[0]?.event?.key;
    expect(before.map((l) => l.event?.type)).toEqual(['send', 'answer', 'retry']);
    expect(before[1]?.event).toMatchObject({ type: 'answer', request: 'send', key, reason: expect.any(String) });
    expect(JSON.parse(readFileSync(recordFile, 'utf8'))).toMatchObject({ key, status: 'open', operation: 'refundCharge' });
    first.child.kill('SIGKILL');
    await expect(first.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });
    // It did refund: the provider has it, though no answer said so.
    expect(await atProvider('refunds', c.providerChargeId)).toHaveLength(1);

    // The second process, on the same store, with a network that answers.
    const second = refundProcess(dir, c.id, 'normal');
    const after = await second.readUntil((l) => l.outcome !== undefined || l.error !== undefined);
    await expect(second.exited).resolves.toEqual({ code: 0, signal: null });

    expect(after.at(-1)?.outcome).toMatchObject({ status: 'SUCCEEDED', key, replayed: true, refund: { chargeId: c.id, amount: 1700 } });
    const events = after.flatMap((l) => (l.event ? [l.event] : []));
    expect(events.filter((e) => e.type === 'send').map((e) => [e.request, e.key])).toEqual([['status', key]]);
    expect(JSON.parse(readFileSync(recordFile, 'utf8'))).toMatchObject({ key, status: 'settled' });

    const refunds = await atProvider('refunds', c.providerChargeId);
    expect(refunds.map((r) => ({ status: r.status, amount: r.amount }))).toEqual([{ status: 'succeeded', amount: 1700 }]);
    expect((await chargeRecord(c.key))?.refunds).toHaveLength(1);
  });

  it("a refund that never reached the server: the restarted process finds no such key, and sends the refund under the stored one", async () => {
    const c = await charge('AUTOMATIC', 800);
    const dir = mkdtempSync(join(tmpdir(), 'chargeonce-restart-'));
    dirs.push(dir);
    // A process killed after it kept its record and before its first byte: the record, written as the runner writes it.
    const { fileKeyStore } = await import('../src/server.js');
    const key = crypto.randomUUID();
    await fileKeyStore(dir).create(`refund:${c.id}`, JSON.stringify({ v: 1, operation: 'refundCharge', key, input: { chargeId: c.id }, createdAt: new Date().toISOString(), status: 'open' }));

    const second = refundProcess(dir, c.id, 'normal');
    const after = await second.readUntil((l) => l.outcome !== undefined || l.error !== undefined);

    expect(after.at(-1)?.outcome).toMatchObject({ status: 'SUCCEEDED', key, replayed: false });
    const answers = after.flatMap((l) => (l.event?.type === 'answer' ? [l.event] : []));
    expect(answers.map((e) => [e.request, e.key, e.status])).toEqual([
      ['status', key, null],
      ['send', key, 'SUCCEEDED'],
    ]);
    expect(await atProvider('refunds', c.providerChargeId)).toHaveLength(1);
  });
});
