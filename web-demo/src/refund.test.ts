// The refund through the shop's backend (refund.ts): what the page sends
// and how the backend's answer is read in the library's words, what it
// refunds, and the desk (desk.ts) as a refund runs it on the library's
// runner, over a fake backend and fake timers: the same refund id on
// every retry and after a reload, kept before the first byte, a bounded
// jittered backoff, PROCESSING followed, refusals taken as answers.
import { storageKeyStore, type RunnerEvent } from '@chargeonce/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { refundAct } from './backend';
import { actRetry, actsStoragePrefix } from './desk';
import { MemoryStorage, paidWith, sendingState, settledWith, timersClock } from './fakes';
import { RefundDesk, refundOperation, refundTarget, type Refund, type RefundTarget } from './refund';

const json = (status: number, body: unknown) => () => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const refund: Refund = { id: 'r1', chargeId: 'c1', amount: 11300, currency: 'USD', providerRefundId: 're_1', status: 'SUCCEEDED', createdAt: '2026-01-01T00:00:00Z' };

/** refundCharge's payload, as the backend answers it. */
const refunded = (replayed: boolean) => json(200, { idempotencyKey: 'demo-refund:rf', status: 'SUCCEEDED', replayed, refund, failure: null, retryAfterMs: null });

type Reply = (() => Response) | 'lost' | 'hang';

/** A fake shop backend: it answers replies in turn, and records what each request carried, and what the page's store held as it arrived. */
function backend(storage: MemoryStorage) {
  const sent: { path: string; body: Record<string, unknown>; kept: string | null }[] = [];
  const replies: Reply[] = [];
  const fetch = (async (url: string, init: RequestInit) => {
    const body = JSON.parse(String(init.body)) as Record<string, unknown>;
    const kept = storage.getItem(`${actsStoragePrefix}refund:${String(body.chargeId)}`);
    sent.push({ path: String(url), body, kept });
    const r = replies.shift() ?? 'hang';
    if (r === 'lost') throw new TypeError('Failed to fetch');
    if (r === 'hang') return new Promise<Response>(() => {});
    return r();
  }) as typeof globalThis.fetch;
  return { fetch, sent, replies };
}

describe("refundOperation: the refund, sent to the shop's backend and read in the library's words", () => {
  const send = (f: (url: string, init: RequestInit) => Promise<Response>) => refundOperation(f as typeof fetch).send('rf-1', { chargeId: 'c1' });

  it('posts the refund id and the charge as JSON to the route, and answers its payload', async () => {
    const sent: { url: string; init: RequestInit }[] = [];
    const a = await send(async (url, init) => {
      sent.push({ url, init });
      return refunded(false)();
    });
    expect(a).toMatchObject({ kind: 'payload', http: 200, payload: { status: 'SUCCEEDED', replayed: false, refund } });
    expect(sent).toHaveLength(1);
    expect(sent[0].url).toBe(refundAct.path);
    expect(sent[0].init.method).toBe('POST');
    expect(JSON.parse(String(sent[0].init.body))).toEqual({ refundId: 'rf-1', chargeId: 'c1' });
    // The page sends no key of any kind: the backend holds the secret one.
    expect(new Headers(sent[0].init.headers).has('Authorization')).toBe(false);
  });

  it("a refusal: the backend's code and message, what remains refundable, and whether the library retries that code", async () => {
    await expect(send(async () => json(409, { error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 } })())).resolves.toEqual({
      kind: 'error',
      error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', extensions: { refundable: 0 } },
      retryable: false,
      http: 409,
    });
    await expect(send(async () => json(503, { error: { code: 'SERVICE_UNAVAILABLE', message: 'busy' } })())).resolves.toMatchObject({
      kind: 'error',
      retryable: true,
    });
  });

  it.each([
    ['no answer', async () => Promise.reject(new TypeError('Failed to fetch'))],
    ['a cut body', async () => new Response(new ReadableStream({ start: (c) => c.error(new TypeError('network error')) }))],
    ['not JSON', async () => new Response('<html>', { status: 502 })],
    ['an error without a code', async () => json(500, { message: 'oops' })()],
  ])('%s: no answer, which the runner sends again', async (_, f) => {
    await expect(send(f)).resolves.toMatchObject({ kind: 'lost' });
  });

  it('SUCCEEDED without a refund made nothing: the runner takes it for no answer', () => {
    expect(refundOperation().made({ status: 'SUCCEEDED', replayed: false })).toBeNull();
    expect(refundOperation().made({ status: 'SUCCEEDED', replayed: false, refund })).toEqual({ refund });
  });
});

describe('refundTarget', () => {
  it('is the charge of a checkout that SUCCEEDED, and nothing before', () => {
    const charge = { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-01-01T00:00:00Z', captureStatus: 'CAPTURED' as const, amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null };
    expect(refundTarget(paidWith(charge))).toEqual({ chargeId: 'c1', amount: 11300, currency: 'USD' });
    expect(refundTarget(settledWith({ status: 'FAILED', key: 'k1', failure: { code: 'card_declined', message: 'declined' }, replayed: false }))).toBeNull();
    expect(refundTarget(sendingState())).toBeNull();
  });

  it('of an authorization, nothing until the shop captured; then what it captured, as the capture answered the charge', () => {
    const held = {
      id: 'c1',
      amount: 11300,
      currency: 'USD',
      orderId: null,
      providerChargeId: 'ch_1',
      createdAt: '2026-01-01T00:00:00Z',
      captureStatus: 'UNCAPTURED' as const,
      amountCaptured: 0,
      amountCapturable: 11300,
      authorizationExpiresAt: '2026-01-08T00:00:00Z',
    };
    const authorized = paidWith(held);
    expect(refundTarget(authorized)).toBeNull();
    expect(refundTarget(authorized, held)).toBeNull();
    const shipped = { ...held, captureStatus: 'PARTIALLY_CAPTURED' as const, amountCaptured: 6000, amountCapturable: 5300 };
    expect(refundTarget(authorized, shipped)).toEqual({ chargeId: 'c1', amount: 6000, currency: 'USD' });
    expect(refundTarget(authorized, { ...shipped, id: 'c2' }), "another charge's word says nothing of this one").toBeNull();
  });
});

const target: RefundTarget = { chargeId: 'c1', amount: 11300, currency: 'USD' };

/** The jitter the tests draw: each wait is half its ceiling (500 ms, then 1 s: at most 500 ms, then 1 s). */
const jitter = 0.5;

/** A desk over the fake backend, its records in storage, with fake timers; ids rf-1, rf-2, … */
function desk(storage = new MemoryStorage()) {
  const b = backend(storage);
  const events: RunnerEvent[] = [];
  let ids = 0;
  const d = new RefundDesk({
    store: storageKeyStore(storage, actsStoragePrefix),
    clock: timersClock,
    fetch: b.fetch,
    onEvent: (e) => events.push(e),
    mintId: () => `rf-${++ids}`,
    random: () => jitter,
  });
  const kinds: string[] = [];
  d.subscribe((next) => kinds.push(next.phase.kind));
  return { d, ...b, storage, kinds, events };
}

describe('RefundDesk, on the library runner', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('offers nothing until there is a charge to refund', () => {
    const { d } = desk();
    expect(d.refund()).toBe(false);
    expect(d.state).toEqual({ target: null, phase: { kind: 'none' } });
  });

  it('a lost answer: the same refund id again after a short wait, and the replay is the refund', async () => {
    const { d, sent, replies, events } = desk();
    d.show(target);
    replies.push('lost', refunded(true));
    expect(d.refund()).toBe(true);
    expect(d.state.phase).toEqual({ kind: 'sending', id: 'rf-1', try: 1 });
    await vi.advanceTimersByTimeAsync(0);
    expect(d.state.phase).toEqual({ kind: 'retrying', id: 'rf-1', cause: 'lost', code: null, waitMs: actRetry.baseMs * jitter });
    // Kept before the first byte, under the charge's name: a reload would send this id.
    expect(JSON.parse(sent[0].kept!)).toMatchObject({ key: 'rf-1', operation: 'refundCharge', input: { chargeId: 'c1' }, status: 'open' });
    await vi.advanceTimersByTimeAsync(actRetry.baseMs * jitter);
    expect(sent.map((r) => r.body)).toEqual([
      { refundId: 'rf-1', chargeId: 'c1' },
      { refundId: 'rf-1', chargeId: 'c1' },
    ]);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1', made: { refund }, replayed: true, lost: true });
    expect(d.refund()).toBe(false); // nothing remains
    // The timeline's rows: each send and its answer, as the runner told them.
    expect(events.filter((e) => e.type === 'send' || e.type === 'answer').map((e) => [e.type, e.key, e.operation])).toEqual([
      ['send', 'rf-1', 'refundCharge'],
      ['answer', 'rf-1', 'refundCharge'],
      ['send', 'rf-1', 'refundCharge'],
      ['answer', 'rf-1', 'refundCharge'],
    ]);
  });

  it(`gives up after ${actRetry.maxAttempts} tries without an answer, backing off with jitter; Refund then sends the same id`, async () => {
    const { d, sent, replies } = desk();
    d.show(target);
    replies.push('lost', 'lost', 'lost');
    d.refund();
    await vi.advanceTimersByTimeAsync(actRetry.baseMs * jitter - 1);
    expect(sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(2 * actRetry.baseMs * jitter - 1);
    expect(sent).toHaveLength(2); // the ceiling doubles
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(3);
    expect(d.state.phase).toEqual({ kind: 'unknown', id: 'rf-1', code: null, tries: 3 });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(3); // no try after the last

    replies.push(refunded(false));
    expect(d.refund()).toBe(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map((r) => r.body.refundId)).toEqual(['rf-1', 'rf-1', 'rf-1', 'rf-1']);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1', replayed: false });
  });

  it('the waits are full jitter: a draw of 0 sends again at once, never later than the ceiling', async () => {
    const storage = new MemoryStorage();
    const b = backend(storage);
    const d = new RefundDesk({ store: storageKeyStore(storage, actsStoragePrefix), clock: timersClock, fetch: b.fetch, random: () => 0, mintId: () => 'rf-1' });
    d.show(target);
    b.replies.push('lost', refunded(true));
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(b.sent).toHaveLength(2);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', lost: true });
  });

  it('PROCESSING: sends the same id again at retryAfterMs, until the refund is final', async () => {
    const { d, sent, replies, kinds } = desk();
    d.show(target);
    const processing = { status: 'PROCESSING', replayed: false, retryAfterMs: 3_000 };
    replies.push(json(200, processing), json(200, { ...processing, replayed: true }), refunded(true));
    d.refund();
    await vi.advanceTimersByTimeAsync(2_999);
    expect(sent).toHaveLength(1);
    expect(d.state.phase).toEqual({ kind: 'processing', id: 'rf-1', retryAfterMs: 3_000 });
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(sent.map((r) => r.body.refundId)).toEqual(['rf-1', 'rf-1', 'rf-1']);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', replayed: true, lost: false });
    expect(kinds).toEqual(['none', 'sending', 'processing', 'sending', 'processing', 'sending', 'succeeded']);
  });

  it('a busy backend is retried with the same id; a refusal is an answer, sent once', async () => {
    const { d, sent, replies } = desk();
    d.show(target);
    replies.push(json(503, { error: { code: 'SERVICE_UNAVAILABLE', message: 'busy' } }), json(409, { error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 } }));
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(d.state.phase).toMatchObject({ kind: 'retrying', cause: 'busy', code: 'SERVICE_UNAVAILABLE' });
    await vi.advanceTimersByTimeAsync(actRetry.capMs * 4);
    expect(sent).toHaveLength(2);
    expect(d.state.phase).toEqual({ kind: 'refused', id: 'rf-1', code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 });
    expect(d.refund()).toBe(false); // the charge is refunded in full
  });

  it('FAILED: nothing went back, and the next Refund is a new refund, with a new id', async () => {
    const { d, sent, replies } = desk();
    d.show(target);
    replies.push(json(200, { status: 'FAILED', replayed: false, failure: { code: 'expired_or_canceled_card', message: 'closed' } }), refunded(false));
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(d.state.phase).toEqual({ kind: 'failed', id: 'rf-1', failure: { code: 'expired_or_canceled_card', message: 'closed' } });
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map((r) => r.body.refundId)).toEqual(['rf-1', 'rf-2']);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-2' });
  });

  it('a double click sends one request', async () => {
    const { d, sent } = desk();
    d.show(target);
    expect(d.refund()).toBe(true);
    expect(d.refund()).toBe(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent).toHaveLength(1);
  });

  it('a reload picks the refund up: an open one is sent again with its own id, a settled one only shown', async () => {
    const storage = new MemoryStorage();
    const first = desk(storage);
    first.d.show(target);
    first.d.refund(); // its answer never comes: the page is reloaded
    await vi.advanceTimersByTimeAsync(0);

    const reloaded = desk(storage);
    reloaded.replies.push(refunded(true));
    reloaded.d.show(null); // resuming: no charge to show yet
    reloaded.d.show(target);
    await vi.advanceTimersByTimeAsync(0);
    expect(reloaded.sent.map((r) => r.body)).toEqual([{ refundId: 'rf-1', chargeId: 'c1' }]);
    expect(reloaded.d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1' });

    const again = desk(storage);
    again.d.show(target);
    await vi.advanceTimersByTimeAsync(0);
    expect(again.sent).toEqual([]);
    expect(again.d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1', made: { refund } });
  });

  it("another charge's refund is its own: the desk shows that charge's, and the last one's run ends on its own, unseen", async () => {
    const { d, sent, replies, events } = desk();
    d.show(target);
    replies.push('lost', refunded(true));
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    d.show({ ...target, chargeId: 'c2' });
    expect(d.state.phase).toEqual({ kind: 'none' });
    const told = events.length;
    await vi.advanceTimersByTimeAsync(60_000);
    // The first refund's retry went, with its id, to its end; the page shows and tells none of it.
    expect(sent.map((r) => r.body)).toEqual([
      { refundId: 'rf-1', chargeId: 'c1' },
      { refundId: 'rf-1', chargeId: 'c1' },
    ]);
    expect(events).toHaveLength(told);
    expect(d.state).toEqual({ target: { ...target, chargeId: 'c2' }, phase: { kind: 'none' } });
  });
});
