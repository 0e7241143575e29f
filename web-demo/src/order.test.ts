// The order of an authorization (order.ts): what Ship order and Cancel
// order send to the shop's backend and how their answers read, which
// charge is an order at all, and the two acts on the library's runner over
// a fake backend and fake timers: one capture id through a lost answer, a
// reload that picks it up, and never a capture and a void offered at once.
import { storageKeyStore, type Charge } from '@chargeonce/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryStorage, paidWith, sendingState, settledWith, timersClock } from './fakes';
import { captureAct, voidAct } from './backend';
import type { CheckoutState } from './checkout-state';
import { actRetry, actsStoragePrefix } from './desk';
import { canCancel, canShip, captureOperation, Order, orderCharge, orderTarget, voidOperation, type OrderTarget } from './order';

const json = (status: number, body: unknown) => () => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

const details = { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-01-01T00:00:00Z' };
const authorized: Charge = { ...details, captureStatus: 'UNCAPTURED', amountCaptured: 0, amountCapturable: 11300, authorizationExpiresAt: '2026-01-08T00:00:00Z' };
const capturedCharge: Charge = { ...details, captureStatus: 'CAPTURED', amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null };
const voidedCharge: Charge = { ...details, captureStatus: 'VOIDED', amountCaptured: 0, amountCapturable: 0, authorizationExpiresAt: null };

const capture = { id: 'cap1', chargeId: 'c1', amount: 11300, final: true, createdAt: '2026-01-02T00:00:00Z' };
const voided = { id: 'v1', chargeId: 'c1', createdAt: '2026-01-02T00:00:00Z' };
/** captureCharge's and voidCharge's payloads, as the backend answers them: with the charge as it is now. */
const shipped = (replayed: boolean) => json(200, { idempotencyKey: 'demo-capture:x', status: 'SUCCEEDED', replayed, capture, charge: capturedCharge });
const cancelled = (replayed: boolean) => json(200, { status: 'SUCCEEDED', replayed, void: voided, charge: voidedCharge });

const final = (charge: Charge | null): CheckoutState =>
  charge ? paidWith(charge) : settledWith({ status: 'FAILED', key: 'k1', failure: { code: 'card_declined', message: 'declined' }, replayed: false });

describe('captureOperation and voidOperation', () => {
  it('post the act id and the charge to their routes, and read what they made, with the charge as it is now', async () => {
    const sent: { url: string; body: unknown }[] = [];
    const f = (answer: () => Response) => (async (url: string, init: RequestInit) => {
      sent.push({ url, body: JSON.parse(String(init.body)) });
      return answer();
    }) as typeof fetch;
    const ship = captureOperation(f(shipped(true)));
    const a = await ship.send('cap-1', { chargeId: 'c1' });
    expect(a).toMatchObject({ kind: 'payload', payload: { status: 'SUCCEEDED', replayed: true } });
    expect(a.kind === 'payload' && ship.made(a.payload!)).toEqual({ capture, charge: capturedCharge });
    const cancel = voidOperation(f(cancelled(false)));
    const b = await cancel.send('v-1', { chargeId: 'c1' });
    expect(b.kind === 'payload' && cancel.made(b.payload!)).toEqual({ void: voided, charge: voidedCharge });
    expect(sent).toEqual([
      { url: captureAct.path, body: { captureId: 'cap-1', chargeId: 'c1' } },
      { url: voidAct.path, body: { voidId: 'v-1', chargeId: 'c1' } },
    ]);
  });

  it.each([
    [
      'a refusal, with what remains capturable',
      json(409, { error: { code: 'CAPTURE_EXCEEDS_AUTHORIZATION', message: 'too much', capturable: 0 } }),
      { kind: 'error', error: { code: 'CAPTURE_EXCEEDS_AUTHORIZATION', message: 'too much', extensions: { capturable: 0 } }, retryable: false, http: 409 },
    ],
    ['PROCESSING, with the wait', json(200, { status: 'PROCESSING', replayed: false, retryAfterMs: 750 }), { kind: 'payload', payload: { status: 'PROCESSING', retryAfterMs: 750 } }],
    ['FAILED, with why', json(200, { status: 'FAILED', replayed: false, failure: { code: 'card_declined', message: 'no' } }), { kind: 'payload', payload: { status: 'FAILED', failure: { code: 'card_declined', message: 'no' } } }],
  ])('%s', async (_, res, want) => {
    await expect(captureOperation((async () => res()) as typeof fetch).send('cap-1', { chargeId: 'c1' })).resolves.toMatchObject(want);
  });

  it('SUCCEEDED without a capture made nothing: the runner takes it for no answer', () => {
    expect(captureOperation().made({ status: 'SUCCEEDED', replayed: false })).toBeNull();
    expect(voidOperation().made({ status: 'SUCCEEDED', replayed: false })).toBeNull();
  });
});

describe('orderTarget', () => {
  it('is the charge of a checkout that SUCCEEDED only authorized; never one captured at once, a decline or an open attempt', () => {
    expect(orderTarget(final(authorized))).toEqual({ chargeId: 'c1', amount: 11300, currency: 'USD', charge: authorized });
    expect(orderTarget(final(capturedCharge))).toBeNull();
    expect(orderTarget(final(null))).toBeNull();
    expect(orderTarget(sendingState())).toBeNull();
  });
});

const target = orderTarget(final(authorized)) as OrderTarget;

type Reply = (() => Response) | 'lost' | 'hang';

/** An order over a fake backend that answers each act's replies in turn, its records in storage, with fake timers. */
function order(storage = new MemoryStorage()) {
  const sent: [string, string][] = [];
  const replies = { ship: [] as Reply[], cancel: [] as Reply[] };
  let ids = 0;
  const fetch = (async (url: string, init: RequestInit) => {
    const body = JSON.parse(String(init.body)) as { captureId?: string; voidId?: string };
    const ship = url === captureAct.path;
    sent.push(ship ? ['capture', body.captureId!] : ['void', body.voidId!]);
    const r = (ship ? replies.ship : replies.cancel).shift() ?? 'hang';
    if (r === 'lost') throw new TypeError('Failed to fetch');
    if (r === 'hang') return new Promise<Response>(() => {});
    return r();
  }) as typeof globalThis.fetch;
  const o = new Order({ store: storageKeyStore(storage, actsStoragePrefix), clock: timersClock, fetch, mintId: () => `id-${++ids}`, random: () => 0.5 });
  return { o, sent, replies, storage };
}

const kept = (storage: MemoryStorage, act: 'capture' | 'void') => {
  const raw = storage.getItem(`${actsStoragePrefix}${act}:c1`);
  return raw ? (JSON.parse(raw) as { key: string; status: string }) : null;
};

describe('Order', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('offers nothing without an authorization', () => {
    const { o, sent } = order();
    expect(o.ship()).toBe(false);
    expect(o.cancel()).toBe(false);
    o.show(null);
    expect(sent).toEqual([]);
  });

  it('Ship order, its answer lost: the same capture id again, the replay is the capture, and the charge is CAPTURED', async () => {
    const { o, sent, replies, storage } = order();
    o.show(target);
    expect(canShip(o.state) && canCancel(o.state)).toBe(true);
    replies.ship.push('lost', shipped(true));
    expect(o.ship()).toBe(true);
    // Shipping: the order cannot be cancelled meanwhile.
    expect(o.cancel()).toBe(false);
    await vi.advanceTimersByTimeAsync(0);
    // Kept: a reload would send this id.
    expect(kept(storage, 'capture')).toMatchObject({ key: 'id-1', status: 'open' });
    expect(o.state.ship).toEqual({ kind: 'retrying', id: 'id-1', cause: 'lost', code: null, waitMs: actRetry.baseMs / 2 });
    await vi.advanceTimersByTimeAsync(actRetry.baseMs / 2);
    expect(sent).toEqual([
      ['capture', 'id-1'],
      ['capture', 'id-1'],
    ]);
    expect(o.state.ship).toMatchObject({ kind: 'succeeded', id: 'id-1', replayed: true, lost: true });
    expect(orderCharge(o.state)).toEqual(capturedCharge);
    // Shipped: nothing more to ship or to cancel.
    expect(o.ship()).toBe(false);
    expect(o.cancel()).toBe(false);
  });

  it('Cancel order voids; then nothing ships, and the charge is VOIDED', async () => {
    const { o, sent, replies, storage } = order();
    o.show(target);
    replies.cancel.push(cancelled(false));
    expect(o.cancel()).toBe(true);
    expect(o.ship()).toBe(false); // cancelling
    await vi.advanceTimersByTimeAsync(0);
    expect(o.state).toMatchObject({ cancel: { kind: 'succeeded', id: 'id-1' }, last: 'cancel' });
    expect(orderCharge(o.state)?.captureStatus).toBe('VOIDED');
    expect(o.ship()).toBe(false);
    expect(sent).toEqual([['void', 'id-1']]);
    expect(kept(storage, 'capture')).toBeNull();
    expect(kept(storage, 'void')).toMatchObject({ key: 'id-1', status: 'settled' });
  });

  it('a declined capture leaves the authorization: Ship order goes again with a new id, and Cancel order is offered', async () => {
    const { o, sent, replies } = order();
    o.show(target);
    replies.ship.push(json(200, { status: 'FAILED', replayed: false, failure: { code: 'card_declined', message: 'no' } }), shipped(false));
    o.ship();
    await vi.advanceTimersByTimeAsync(0);
    expect(o.state.ship).toMatchObject({ kind: 'failed' });
    expect(canCancel(o.state)).toBe(true);
    expect(o.ship()).toBe(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map(([, id]) => id)).toEqual(['id-1', 'id-2']);
  });

  it('every try unanswered: unknown, and Ship order sends the same id again', async () => {
    const { o, sent, replies } = order();
    o.show(target);
    replies.ship.push('lost', 'lost', 'lost', shipped(true));
    o.ship();
    await vi.advanceTimersByTimeAsync(actRetry.capMs * 4);
    expect(o.state.ship).toMatchObject({ kind: 'unknown', id: 'id-1', tries: actRetry.maxAttempts });
    expect(o.ship()).toBe(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.map(([, id]) => id)).toEqual(['id-1', 'id-1', 'id-1', 'id-1']);
    expect(o.state.ship).toMatchObject({ kind: 'succeeded', replayed: true });
  });

  it('a reload picks the order up: an open capture is sent again with its own id, a settled one only shown', async () => {
    const storage = new MemoryStorage();
    const first = order(storage);
    first.o.show(target);
    first.o.ship(); // its answer never comes: the page is reloaded
    await vi.advanceTimersByTimeAsync(0);

    const reloaded = order(storage);
    reloaded.replies.ship.push(shipped(true));
    reloaded.o.show(target);
    await vi.advanceTimersByTimeAsync(0);
    expect(reloaded.sent).toEqual([['capture', 'id-1']]);
    expect(reloaded.o.state).toMatchObject({ ship: { kind: 'succeeded', id: 'id-1' }, cancel: { kind: 'none' }, last: 'ship' });

    const again = order(storage);
    again.o.show(target);
    await vi.advanceTimersByTimeAsync(0);
    expect(again.sent).toEqual([]);
    expect(orderCharge(again.o.state)?.captureStatus).toBe('CAPTURED');
  });

  it('one change per show: both acts of the same order at once, never one of another order', () => {
    const { o } = order();
    const seen: string[] = [];
    o.subscribe((next) => seen.push(`${next.target?.chargeId ?? '-'}:${next.ship.kind}:${next.cancel.kind}`));
    o.show(target);
    o.show({ ...target }); // the same order again: no news
    o.show(null);
    expect(seen).toEqual(['c1:none:none', '-:none:none']);
  });
});
