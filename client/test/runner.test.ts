// The operation runner with the merchant's operations over a fake
// chargeonce (fake-merchant.ts): the key kept before the first byte and
// never replaced, narrow retries, PROCESSING followed by the status query,
// a record found open asked about first, typed outcomes and errors.
import { describe, expect, it } from 'vitest';
import { AbortError } from '../src/errors.js';
import { memoryKeyStore, type KeyStore } from '../src/keystore.js';
import { createMerchant, merchantOperations } from '../src/merchant.js';
import { NameInUseError, OperationRejectedError, OperationUnknownError } from '../src/operation-errors.js';
import type { OperationRecord, RunnerEvent, RunnerOptions } from '../src/operation.js';
import { createRunner } from '../src/runner.js';
import { FakeMerchantServer } from './fake-merchant.js';

/** A clock that moves only when the runner sleeps, and the waits it slept. */
function handClock() {
  const waits: number[] = [];
  let t = Date.parse('2026-01-01T00:00:00Z');
  return {
    waits,
    now: () => t,
    sleep: async (ms: number) => {
      waits.push(ms);
      t += ms;
    },
    advance: (ms: number) => (t += ms),
  };
}

function setup(o: Partial<RunnerOptions> = {}) {
  const server = new FakeMerchantServer();
  const store = memoryKeyStore();
  const clock = handClock();
  const events: RunnerEvent[] = [];
  const ops = merchantOperations({ fetch: server.fetch, endpoint: 'https://api.example/graphql', headers: { Authorization: 'Bearer co_sk_test' }, timeoutMs: 1000, now: clock.now });
  let n = 0;
  const options: RunnerOptions = { store, clock, random: () => 0.5, mintKey: () => `key-${++n}`, onEvent: (e) => events.push(e), ...o };
  const runner = createRunner(options);
  /** A runner in a new process: the same store and server, nothing in memory. */
  const restart = (more: Partial<RunnerOptions> = {}) => createRunner({ ...options, ...more });
  const stored = async (name: string) => JSON.parse((await store.get(name)) ?? 'null') as OperationRecord | null;
  return { server, store, clock, events, ops, runner, restart, stored };
}

const refund = { chargeId: 'ch_1', amount: 500 };

describe('the operation runner', () => {
  it('keeps the key and the input before the first byte, and settles with what the operation made', async () => {
    const { server, runner, ops, store, stored } = setup();
    const atSend: (string | null)[] = [];
    server.onSend = async () => void atSend.push(await store.get('refund:order-42'));

    const outcome = await runner.run(ops.refundCharge, 'refund:order-42', refund);

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: false, refund: { id: 're_key-1', amount: 500 } });
    expect(JSON.parse(atSend[0]!)).toMatchObject({ v: 1, operation: 'refundCharge', key: 'key-1', input: refund, status: 'open' });
    expect(server.sent.map((s) => [s.operationName, s.key])).toEqual([['RefundCharge', 'key-1']]);
    expect(server.sent[0]!.headers.get('Authorization')).toBe('Bearer co_sk_test');
    expect(await stored('refund:order-42')).toMatchObject({ status: 'settled', outcome, expiresAt: '2099-01-01T00:00:00Z' });
  });

  it('a lost answer: the same key again after a jittered wait, and the server replays what it did once', async () => {
    const { server, runner, ops, clock, events } = setup();
    server.script = ['lose-after'];

    const outcome = await runner.run(ops.refundCharge, 'refund:order-42', refund);

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true });
    expect(server.named('RefundCharge').map((s) => s.key)).toEqual(['key-1', 'key-1']);
    expect(server.done.size).toBe(1);
    expect(clock.waits).toEqual([200]); // full jitter: 0.5 of baseMs 400
    expect(events.map((e) => e.type)).toEqual(['send', 'answer', 'retry', 'send', 'answer']);
    expect(events[1]).toMatchObject({ type: 'answer', request: 'send', reason: 'terminated' });
    expect(events[2]).toMatchObject({ type: 'retry', cause: 'network', waitMs: 200, try: 2 });
  });

  it("a busy server's hint wins over the backoff, and nothing it refused that way is counted as done", async () => {
    const { server, runner, ops, clock } = setup();
    server.script = [{ code: 'RATE_LIMITED', http: 429, retryAfterMs: 1500 }, { code: 'SERVICE_UNAVAILABLE', http: 503, retryAfterMs: 50_000 }];

    const outcome = await runner.run(ops.refundCharge, 'r', refund);

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: false });
    expect(clock.waits).toEqual([1500, 10_000]); // the hint, capped at capMs
    expect(server.named('RefundCharge').map((s) => s.key)).toEqual(['key-1', 'key-1', 'key-1']);
  });

  it('PROCESSING is followed by the status query at the server\'s pace, never by sending the refund again', async () => {
    const { server, runner, ops, clock, events } = setup();
    server.script = ['processing'];
    server.retryAfterMs = 700;
    let polls = 0;
    server.onSend = (s) => {
      if (s.operationName === 'RefundStatus' && ++polls === 3) server.finish(s.key);
    };

    const outcome = await runner.run(ops.refundCharge, 'r', refund);

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(server.sent.map((s) => s.operationName)).toEqual(['RefundCharge', 'RefundStatus', 'RefundStatus', 'RefundStatus']);
    expect(new Set(server.sent.map((s) => s.key))).toEqual(new Set(['key-1']));
    expect(clock.waits).toEqual([700, 700, 700]);
    expect(events.filter((e) => e.type === 'follow').map((e) => (e as { waitMs: number }).waitMs)).toEqual([700, 700, 700]);
  });

  it('a decline is an outcome, kept, and answered again from the store without a request', async () => {
    const { server, runner, ops } = setup();
    server.script = ['decline'];

    const first = await runner.run(ops.captureCharge, 'capture:order-7', { chargeId: 'ch_7' });
    const again = await runner.run(ops.captureCharge, 'capture:order-7', { chargeId: 'ch_7' });

    expect(first).toEqual({ status: 'FAILED', key: 'key-1', replayed: false, failure: { code: 'card_declined', message: 'The card was declined.' } });
    expect(again).toEqual(first);
    expect(server.sent).toHaveLength(1);
  });

  it('a refusal is a typed rejection, kept with its key; running it again sends the same key, and forget() frees the name', async () => {
    const { server, runner, ops, stored } = setup();
    const exceeds = { code: 'REFUND_EXCEEDS_CHARGE', field: 'input.amount', more: { refundable: 300 } };
    server.script = [exceeds, exceeds];

    const err = await runner.run(ops.refundCharge, 'r', refund).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationRejectedError);
    expect(err).toMatchObject({ recordName: 'r', key: 'key-1', code: 'REFUND_EXCEEDS_CHARGE', field: 'input.amount', extensions: { refundable: 300 } });
    expect(await stored('r')).toMatchObject({ status: 'rejected', key: 'key-1', error: { code: 'REFUND_EXCEEDS_CHARGE' } });
    expect(server.done.size).toBe(0);

    await expect(runner.run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationRejectedError);
    expect(server.sent.map((s) => s.key)).toEqual(['key-1', 'key-1']);
    await expect(runner.run(ops.refundCharge, 'r', { chargeId: 'ch_1', amount: 100 })).rejects.toBeInstanceOf(NameInUseError);

    await runner.forget('r');
    const outcome = await runner.run(ops.refundCharge, 'r', { chargeId: 'ch_1', amount: 100 });
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-2' });
  });

  it('the budget spent without an answer: unknown, the record left open; the next run asks about the same key first', async () => {
    const { server, runner, ops, stored, events } = setup({ retry: { maxAttempts: 3 } });
    server.script = ['lose-after', 'network', 'network'];

    const err = await runner.run(ops.refundCharge, 'r', refund).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationUnknownError);
    expect(err).toMatchObject({ recordName: 'r', key: 'key-1' });
    expect(events.at(-1)).toMatchObject({ type: 'unknown', key: 'key-1' });
    expect(await stored('r')).toMatchObject({ status: 'open', key: 'key-1' });
    expect(server.named('RefundCharge')).toHaveLength(3);

    const outcome = await runner.run(ops.refundCharge, 'r', refund);
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true });
    expect(server.sent.slice(3).map((s) => [s.operationName, s.key])).toEqual([['RefundStatus', 'key-1']]);
    expect(server.done.size).toBe(1);
  });

  it('the budget is time as well as sends: no retry is scheduled past budgetMs', async () => {
    const { server, runner, ops, clock } = setup({ retry: { budgetMs: 1000, baseMs: 400 }, random: () => 0.99 });
    server.script = ['network', 'network', 'network', 'network'];

    await expect(runner.run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    expect(clock.waits).toEqual([396]); // the next, up to 792 ms, would end past 1000 ms
    expect(server.sent).toHaveLength(2);
  });

  it('a record found open after a restart whose refund never arrived: the status query says null, and the same key is sent', async () => {
    const { server, runner, ops, restart } = setup({ retry: { maxAttempts: 2 } });
    server.script = ['network', 'network'];
    await expect(runner.run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    expect(server.done.size).toBe(0);

    const outcome = await restart().run(ops.refundCharge, 'r', refund);

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: false });
    expect(server.sent.slice(2).map((s) => [s.operationName, s.key])).toEqual([
      ['RefundStatus', 'key-1'],
      ['RefundCharge', 'key-1'],
    ]);
  });

  it('another input under an open name is refused, in this process and after a restart; so is forget()', async () => {
    const { server, runner, ops, restart } = setup();
    server.script = ['processing'];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    server.onSend = (s) => (s.operationName === 'RefundStatus' ? held : undefined);

    const first = runner.run(ops.refundCharge, 'r', refund);
    await expect(runner.run(ops.refundCharge, 'r', { chargeId: 'ch_1', amount: 1 })).rejects.toMatchObject({ name: 'NameInUseError', key: 'key-1', status: 'open' });
    await expect(runner.run(ops.captureCharge, 'r', refund)).rejects.toBeInstanceOf(NameInUseError);
    await expect(runner.forget('r')).rejects.toBeInstanceOf(NameInUseError);
    await expect(restart().run(ops.refundCharge, 'r', { chargeId: 'ch_1', amount: 1 })).rejects.toMatchObject({ name: 'NameInUseError', key: 'key-1' });
    await expect(restart().forget('r')).rejects.toBeInstanceOf(NameInUseError);

    server.finish('key-1');
    release();
    await expect(first).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    await expect(runner.run(ops.refundCharge, 'r', { chargeId: 'ch_1', amount: 1 })).rejects.toMatchObject({ name: 'NameInUseError', status: 'settled' });
    await runner.forget('r');
    await expect(runner.record('r')).resolves.toBeNull();
  });

  it('the same name run twice at once in one process: one run, one key, one promise', async () => {
    const { server, runner, ops } = setup();
    server.script = ['lose-after'];

    const [a, b] = await Promise.all([runner.run(ops.refundCharge, 'r', refund), runner.run(ops.refundCharge, 'r', { amount: 500, chargeId: 'ch_1' })]);

    expect(a).toBe(b);
    expect(server.named('RefundCharge').map((s) => s.key)).toEqual(['key-1', 'key-1']);
  });

  it('two processes that start one name at once on one store keep one key (create is atomic)', async () => {
    const { server, ops, restart } = setup();
    let n = 0;
    const a = restart({ mintKey: () => `a-${++n}` });
    const b = restart({ mintKey: () => `b-${++n}` });

    const [x, y] = await Promise.all([a.run(ops.refundCharge, 'r', refund), b.run(ops.refundCharge, 'r', refund)]);

    expect(x.key).toBe(y.key);
    expect(new Set(server.sent.map((s) => s.key)).size).toBe(1);
    expect(server.done.size).toBe(1);
  });

  it('a caller that stops waiting gets an AbortError; the run goes on and settles its record', async () => {
    const { server, runner, ops, stored } = setup();
    let release!: () => void;
    server.onSend = () => new Promise<void>((r) => (release = r));
    const ctl = new AbortController();

    const waiting = runner.run(ops.voidCharge, 'void:order-9', { chargeId: 'ch_9' }, { signal: ctl.signal });
    await new Promise((r) => setTimeout(r, 0));
    ctl.abort();
    const err = await waiting.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect(err).toMatchObject({ key: 'key-1' });

    release();
    await expect(runner.run(ops.voidCharge, 'void:order-9', { chargeId: 'ch_9' })).resolves.toMatchObject({ status: 'SUCCEEDED', void: { id: 'vd_key-1' } });
    expect(await stored('void:order-9')).toMatchObject({ status: 'settled' });
    expect(server.named('VoidCharge')).toHaveLength(1);
  });

  it('a refusal of the status query says nothing of the operation: unknown, the record open', async () => {
    const { server, runner, ops, restart, stored } = setup({ retry: { maxAttempts: 1 } });
    server.script = ['lose-after'];
    await expect(runner.run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    server.statusScript = [{ code: 'FORBIDDEN', http: 403 }];

    await expect(restart().run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    expect(await stored('r')).toMatchObject({ status: 'open', key: 'key-1' });
    expect(server.named('RefundCharge')).toHaveLength(1);
  });

  it("past the server's expiresAt an open record is only asked about: a key the server forgot is never sent again", async () => {
    const { server, ops, store, restart } = setup();
    const rec: OperationRecord = { v: 1, operation: 'refundCharge', key: 'old', input: refund, createdAt: '2025-12-01T00:00:00Z', status: 'open', expiresAt: '2025-12-02T00:00:00Z' };
    await store.set('r', JSON.stringify(rec));

    await expect(restart().run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    expect(server.sent.map((s) => s.operationName)).toEqual(['RefundStatus']);
  });

  it("an open record older than the server's key retention is only asked about: the server may have forgotten its key", async () => {
    const { server, ops, runner, restart, clock } = setup({ retry: { maxAttempts: 1 } });
    server.script = ['network'];
    await expect(runner.run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    clock.advance(24 * 60 * 60 * 1000 - 1);
    server.statusScript = [{ code: 'SERVICE_UNAVAILABLE', http: 503 }];
    // Within the retention it would be sent again (the status query is busy here, so the run ends unknown first).
    await expect(restart().run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    clock.advance(1);

    await expect(restart().run(ops.refundCharge, 'r', refund)).rejects.toBeInstanceOf(OperationUnknownError);
    expect(server.sent.map((s) => s.operationName)).toEqual(['RefundCharge', 'RefundStatus', 'RefundStatus']);

    const within = await restart({ keyRetentionMs: 48 * 60 * 60 * 1000 }).run(ops.refundCharge, 'r', refund);
    expect(within).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: false });
    expect(server.sent.slice(3).map((s) => s.operationName)).toEqual(['RefundStatus', 'RefundCharge']);
  });

  it('an unreadable record is never replaced by a new key', async () => {
    const { server, ops, store, runner } = setup();
    await store.set('r', '{"v":1,"key":');

    await expect(runner.run(ops.refundCharge, 'r', refund)).rejects.toThrow(/unreadable/);
    expect(server.sent).toHaveLength(0);
    expect(await store.get('r')).toBe('{"v":1,"key":');
  });

  it('a store that fails before the first byte fails the run, and nothing is sent', async () => {
    const { server, ops, restart } = setup();
    const broken: KeyStore = { ...memoryKeyStore(), create: async () => Promise.reject(new Error('disk full')) };

    await expect(restart({ store: broken }).run(ops.refundCharge, 'r', refund)).rejects.toThrow('disk full');
    expect(server.sent).toHaveLength(0);
  });
});

describe('createCheckoutSession through the runner', () => {
  it('a lost answer: the same key again, the session replayed; it has no status query', async () => {
    const { server, runner, ops } = setup();
    server.script = ['lose-after'];

    const outcome = await runner.run(ops.createCheckoutSession, 'session:cart-3', { amount: 2500, currency: 'USD' });

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true, session: { id: 'cs_key-1', clientSecret: 'cs_key-1_secret' } });
    expect(server.sent.map((s) => s.operationName)).toEqual(['CreateCheckoutSession', 'CreateCheckoutSession']);
  });

  it('found open after a restart, it is sent again (there is nothing to ask)', async () => {
    const { server, runner, ops, restart } = setup({ retry: { maxAttempts: 1 } });
    server.script = ['lose-after'];
    await expect(runner.run(ops.createCheckoutSession, 's', { amount: 2500, currency: 'USD' })).rejects.toBeInstanceOf(OperationUnknownError);

    const outcome = await restart().run(ops.createCheckoutSession, 's', { amount: 2500, currency: 'USD' });

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true });
    expect(server.sent.map((s) => [s.operationName, s.key])).toEqual([
      ['CreateCheckoutSession', 'key-1'],
      ['CreateCheckoutSession', 'key-1'],
    ]);
  });
});

describe('createMerchant', () => {
  it('sends the secret key and its headers, runs each operation under its name, and forgets a settled one', async () => {
    const server = new FakeMerchantServer();
    const store = memoryKeyStore();
    const events: RunnerEvent[] = [];
    const m = createMerchant({ endpoint: 'https://api.example/graphql', secretKey: 'co_sk_live', store, fetch: server.fetch, headers: { 'X-Request-Id': 'r1' }, retry: { baseMs: 1 }, onEvent: (e) => events.push(e) });
    server.script = ['lose-after'];

    const r = await m.refundCharge('refund:order-42', { chargeId: 'ch_1' });
    const c = await m.captureCharge('capture:order-43', { chargeId: 'ch_2', amount: 600, final: false });
    const v = await m.voidCharge('void:order-44', { chargeId: 'ch_3' });
    const s = await m.createCheckoutSession('session:cart-45', { amount: 2500, currency: 'USD', orderId: 'order-45' });

    expect(r).toMatchObject({ status: 'SUCCEEDED', replayed: true, refund: { chargeId: 'ch_1' } });
    expect(c).toMatchObject({ status: 'SUCCEEDED', capture: { amount: 600 }, charge: { id: 'ch_2' } });
    expect(v).toMatchObject({ status: 'SUCCEEDED', void: { chargeId: 'ch_3' }, charge: { captureStatus: 'VOIDED' } });
    expect(s).toMatchObject({ status: 'SUCCEEDED', session: { clientSecret: `cs_${s.key}_secret` } });
    for (const x of server.sent) {
      expect(x.headers.get('Authorization')).toBe('Bearer co_sk_live');
      expect(x.headers.get('X-Request-Id')).toBe('r1');
    }
    expect([...store.entries.keys()].sort()).toEqual(['capture:order-43', 'refund:order-42', 'session:cart-45', 'void:order-44']);
    expect(events.filter((e) => e.type === 'retry')).toHaveLength(1);

    await m.forget('refund:order-42');
    expect(store.entries.has('refund:order-42')).toBe(false);
  });
});
