// The refund through the shop's backend (refund.ts): what the page sends and
// how it reads the answer, what it refunds, and the desk's loop (desk.ts)
// as a refund runs it, over a fake backend and fake timers: the same
// refund id on every retry and after a reload, a bounded backoff,
// PROCESSING followed, refusals taken as answers.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryStorage, timersClock } from './fakes';
import { actRetry as refundRetry, type ActPayload } from './desk';
import { RefundDesk, refundPath, refundStorageKey, refundTarget, requestRefund, type Refund, type RefundAnswer, type RefundTarget } from './refund';

type RefundPayload = ActPayload<Refund>;

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const refund: Refund = { id: 'r1', chargeId: 'c1', amount: 11300, currency: 'USD', providerRefundId: 're_1', createdAt: '2026-01-01T00:00:00Z' };

/** refundCharge's payload, as the backend answers it. */
const body = (replayed: boolean) => ({ status: 'SUCCEEDED', replayed, refund, failure: null, retryAfterMs: null });

/** The same, as the page reads it. */
const refunded = (replayed: boolean): RefundPayload => ({ status: 'SUCCEEDED', replayed, made: refund });

describe('requestRefund', () => {
  it('posts the refund id and the charge as JSON to the shop backend route, and answers its payload', async () => {
    const sent: { url: string; init?: RequestInit }[] = [];
    const answer = await requestRefund('rf-1', 'c1', async (url, init) => {
      sent.push({ url: String(url), init });
      return json(200, body(false));
    });
    expect(answer).toEqual({ payload: refunded(false) });
    expect(sent).toHaveLength(1);
    expect(sent[0].url).toBe(refundPath);
    expect(sent[0].init?.method).toBe('POST');
    expect(JSON.parse(String(sent[0].init?.body))).toEqual({ refundId: 'rf-1', chargeId: 'c1' });
    // The page sends no key of any kind: the backend holds the secret one.
    expect(new Headers(sent[0].init?.headers).has('Authorization')).toBe(false);
  });

  it("a refusal: the backend's code and message, and what remains refundable", async () => {
    const answer = await requestRefund('rf-1', 'c1', async () =>
      json(409, { error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 } }),
    );
    expect(answer).toEqual({ error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 } });
  });

  it.each([
    ['no answer', async () => Promise.reject(new TypeError('Failed to fetch'))],
    ['a cut body', async () => new Response(new ReadableStream({ start: (c) => c.error(new TypeError('network error')) }))],
    ['not JSON', async () => new Response('<html>', { status: 502 })],
    ['no refund in a SUCCEEDED answer', async () => json(200, { status: 'SUCCEEDED', replayed: false })],
  ])('%s: no answer (code null), which the loop retries', async (_, f) => {
    const answer = await requestRefund('rf-1', 'c1', f as typeof fetch);
    expect(answer).toMatchObject({ error: { code: null } });
  });
});

describe('refundTarget', () => {
  it('is the charge of a checkout that SUCCEEDED, and nothing before', () => {
    const charge = { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-01-01T00:00:00Z', captureStatus: 'CAPTURED' as const, amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null };
    const paid = { idempotencyKey: 'k1', status: 'SUCCEEDED' as const, replayed: false, charge, failure: null };
    expect(refundTarget({ attempt: null, phase: { kind: 'final', payload: paid } })).toEqual({
      attemptKey: 'k1',
      chargeId: 'c1',
      amount: 11300,
      currency: 'USD',
    });
    const declined = { ...paid, status: 'FAILED' as const, charge: null, failure: { code: 'card_declined', message: 'declined' } };
    expect(refundTarget({ attempt: null, phase: { kind: 'final', payload: declined } })).toBeNull();
    expect(refundTarget({ attempt: null, phase: { kind: 'paying', retry: null } })).toBeNull();
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
    const authorized = { attempt: null, phase: { kind: 'final' as const, payload: { idempotencyKey: 'k1', status: 'SUCCEEDED' as const, replayed: false, charge: held, failure: null } } };
    expect(refundTarget(authorized)).toBeNull();
    expect(refundTarget(authorized, held)).toBeNull();
    const shipped = { ...held, captureStatus: 'PARTIALLY_CAPTURED' as const, amountCaptured: 6000, amountCapturable: 5300 };
    expect(refundTarget(authorized, shipped)).toEqual({ attemptKey: 'k1', chargeId: 'c1', amount: 6000, currency: 'USD' });
    expect(refundTarget(authorized, { ...shipped, id: 'c2' }), "another charge's word says nothing of this one").toBeNull();
  });
});

const target: RefundTarget = { attemptKey: 'k1', chargeId: 'c1', amount: 11300, currency: 'USD' };

type Reply = RefundAnswer | 'hang';

/** A desk over a fake backend that answers replies in turn, with fake timers. */
function desk(storage = new MemoryStorage()) {
  const sent: { refundId: string; chargeId: string }[] = [];
  const replies: Reply[] = [];
  let ids = 0;
  const d = new RefundDesk({
    storage,
    clock: timersClock,
    send: (refundId, t) => {
      sent.push({ refundId, chargeId: t.chargeId });
      const r = replies.shift() ?? 'hang';
      return r === 'hang' ? new Promise<RefundAnswer>(() => {}) : Promise.resolve(r);
    },
    mintId: () => `rf-${++ids}`,
  });
  const kinds: string[] = [];
  d.subscribe((next) => kinds.push(next.phase.kind));
  return { d, sent, replies, storage, kinds };
}

const lost: RefundAnswer = { error: { code: null, message: 'Failed to fetch' } };
const answered = (p: RefundPayload): RefundAnswer => ({ payload: p });

describe('RefundDesk', () => {
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
    const { d, sent, replies, storage } = desk();
    d.show(target);
    replies.push(lost, answered(refunded(true)));
    expect(d.refund()).toBe(true);
    // Kept before the first byte: a reload would send this id.
    expect(JSON.parse(storage.getItem(refundStorageKey)!)).toMatchObject({ attemptKey: 'k1', chargeId: 'c1', id: 'rf-1', settled: null });
    await vi.advanceTimersByTimeAsync(0);
    expect(d.state.phase).toEqual({ kind: 'retrying', id: 'rf-1', cause: 'lost', code: null, waitMs: refundRetry.baseMs });
    await vi.advanceTimersByTimeAsync(refundRetry.baseMs);
    expect(sent).toEqual([
      { refundId: 'rf-1', chargeId: 'c1' },
      { refundId: 'rf-1', chargeId: 'c1' },
    ]);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1', replayed: true, lost: true });
    expect(JSON.parse(storage.getItem(refundStorageKey)!).settled).toMatchObject({ kind: 'succeeded' });
    expect(d.refund()).toBe(false); // nothing remains
  });

  it(`gives up after ${refundRetry.maxAttempts} tries without an answer, backing off; Refund then sends the same id`, async () => {
    const { d, sent, replies } = desk();
    d.show(target);
    replies.push(lost, lost, lost);
    d.refund();
    await vi.advanceTimersByTimeAsync(refundRetry.baseMs - 1);
    expect(sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(2 * refundRetry.baseMs - 1);
    expect(sent).toHaveLength(2); // the backoff doubles
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(3);
    expect(d.state.phase).toEqual({ kind: 'unknown', id: 'rf-1', code: null, tries: 3 });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(3); // no try after the last

    replies.push(answered(refunded(false)));
    expect(d.refund()).toBe(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map((r) => r.refundId)).toEqual(['rf-1', 'rf-1', 'rf-1', 'rf-1']);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1', replayed: false });
  });

  it('PROCESSING: asks again with the same id at retryAfterMs, until the refund is final', async () => {
    const { d, sent, replies, kinds } = desk();
    d.show(target);
    const processing: RefundPayload = { status: 'PROCESSING', replayed: false, retryAfterMs: 3_000 };
    replies.push(answered(processing), answered({ ...processing, replayed: true }), answered(refunded(true)));
    d.refund();
    await vi.advanceTimersByTimeAsync(2_999);
    expect(sent).toHaveLength(1);
    expect(d.state.phase).toEqual({ kind: 'processing', id: 'rf-1', retryAfterMs: 3_000 });
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(sent.map((r) => r.refundId)).toEqual(['rf-1', 'rf-1', 'rf-1']);
    expect(d.state.phase).toMatchObject({ kind: 'succeeded', replayed: true, lost: false });
    expect(kinds).toEqual(['none', 'sending', 'processing', 'sending', 'processing', 'sending', 'succeeded']);
  });

  it('a busy backend is retried with the same id; a refusal is an answer, sent once', async () => {
    const { d, sent, replies } = desk();
    d.show(target);
    replies.push(
      { error: { code: 'SERVICE_UNAVAILABLE', message: 'busy' } },
      { error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 } },
    );
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(d.state.phase).toMatchObject({ kind: 'retrying', cause: 'busy', code: 'SERVICE_UNAVAILABLE' });
    await vi.advanceTimersByTimeAsync(refundRetry.capMs * 4);
    expect(sent).toHaveLength(2);
    expect(d.state.phase).toEqual({ kind: 'refused', id: 'rf-1', code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 });
    expect(d.refund()).toBe(false); // the charge is refunded in full
  });

  it('FAILED: nothing went back, and the next Refund is a new refund, with a new id', async () => {
    const { d, sent, replies } = desk();
    d.show(target);
    replies.push(
      answered({ status: 'FAILED', replayed: false, failure: { code: 'expired_or_canceled_card', message: 'closed' } }),
      answered(refunded(false)),
    );
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(d.state.phase).toEqual({ kind: 'failed', id: 'rf-1', failure: { code: 'expired_or_canceled_card', message: 'closed' } });
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map((r) => r.refundId)).toEqual(['rf-1', 'rf-2']);
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
    reloaded.replies.push(answered(refunded(true)));
    reloaded.d.show(null); // resuming: no charge to show yet
    reloaded.d.show(target);
    await vi.advanceTimersByTimeAsync(0);
    expect(reloaded.sent).toEqual([{ refundId: 'rf-1', chargeId: 'c1' }]);
    expect(reloaded.d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1' });

    const again = desk(storage);
    again.d.show(target);
    await vi.advanceTimersByTimeAsync(0);
    expect(again.sent).toEqual([]);
    expect(again.d.state.phase).toMatchObject({ kind: 'succeeded', id: 'rf-1' });
  });

  it("another attempt's charge forgets the refund kept for the last one, and stops its loop", async () => {
    const { d, sent, replies, storage } = desk();
    d.show(target);
    replies.push(lost);
    d.refund();
    await vi.advanceTimersByTimeAsync(0);
    d.show({ ...target, attemptKey: 'k2', chargeId: 'c2' });
    expect(storage.getItem(refundStorageKey)).toBeNull();
    expect(d.state.phase).toEqual({ kind: 'none' });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sent).toHaveLength(1); // the old refund's retry never went
  });
});
