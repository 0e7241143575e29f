// The checkout as a view over a real Charger (@chargeonce/client): the
// shop's backend, chargeonce's answers and the clock are fakes, the charger
// is the library's own. Each test says what the shopper does and what goes
// on the wire.
import { createCharger, type CaptureMethod } from '@chargeonce/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryStorage, timersClock } from './fakes';
import type { CheckoutSession, SessionAnswer } from './cart';
import { attemptOf, Checkout, canPay, demoRetry, isBack, sessionEnded, shownOf, type ReturnSource, type Shown } from './checkout';

interface Sent {
  operationName: string;
  variables: { idempotencyKey: string; input?: { paymentMethod: string; checkoutSession?: string }; checkoutSession?: string };
}

/**
 * What chargeonce answers to one request: a payload (action: PROCESSING
 * with the bank's nextAction; failure: a FAILED answer's code), an error,
 * no answer, or nothing yet.
 */
type Reply =
  | { status: 'SUCCEEDED' | 'FAILED' | 'PROCESSING'; replayed?: boolean; action?: boolean; failure?: string; held?: boolean }
  | { error: string }
  | 'lost'
  | 'hang'
  | null;

/** The bank's challenge page, as the simulator names it. */
const challengeUrl = 'http://shop.test/provider/authenticate/ch_1';
const nextAction = { type: 'REDIRECT', url: challengeUrl, expiresAt: '2099-01-01T00:15:00Z' };

/** The charge of a SUCCEEDED answer: captured at once, or (held) an authorization only. */
const captured = { captureStatus: 'CAPTURED' as const, amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null };
const held = { captureStatus: 'UNCAPTURED' as const, amountCaptured: 0, amountCapturable: 11300, authorizationExpiresAt: '2099-01-08T00:00:00Z' };

const payload = (key: string, r: { status: string; replayed?: boolean; action?: boolean; failure?: string; held?: boolean }) => ({
  idempotencyKey: key,
  status: r.status,
  replayed: r.replayed ?? false,
  retryAfterMs: r.status === 'PROCESSING' ? 1000 : null,
  expiresAt: '2099-01-01T00:00:00Z',
  charge:
    r.status === 'SUCCEEDED'
      ? { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-01-01T00:00:00Z', ...(r.held ? held : captured) }
      : null,
  failure: r.status === 'FAILED' ? { code: r.failure ?? 'card_declined', message: r.failure ? `The card failed: ${r.failure}.` : 'Your card was declined.' } : null,
  nextAction: r.action ? nextAction : null,
});

const session = (cartId: string, captureMethod: CaptureMethod = 'AUTOMATIC'): CheckoutSession => ({
  id: `s-${cartId}`,
  clientSecret: `cs_${cartId}`,
  publishableKey: 'co_pk_demo',
  amount: 11300,
  currency: 'USD',
  orderId: null,
  captureMethod,
  status: 'OPEN',
  expiresAt: '2099-01-01T00:00:00Z',
  replayed: false,
});

/**
 * A page: the checkout over a charger, a fake chargeonce and a fake shop.
 * location: the page's address, as the charger reads it (the return from
 * the bank carries chargeonce_key in it).
 */
function page(storage = new MemoryStorage(), opts: { unsafe?: boolean; location?: { search: string }; keyPrefix?: string } = {}) {
  const sent: Sent[] = [];
  const navigations: string[] = [];
  const returns: { key: string; from: ReturnSource }[] = [];
  const location = opts.location ?? { search: '' };
  const carts: string[] = [];
  const methods: CaptureMethod[] = [];
  let replies: ((s: Sent) => Reply)[] = [];
  let shop: (cartId: string, captureMethod: CaptureMethod) => SessionAnswer = (cartId, m) => ({ session: session(cartId, m) });
  let keys = 0;
  let cartIds = 0;
  const fetch = (async (_url: string, init: RequestInit) => {
    const body = JSON.parse(String(init.body)) as Sent;
    sent.push(body);
    const reply = (replies.shift() ?? (() => null))(body);
    if (reply === 'lost') throw new TypeError('Failed to fetch');
    if (reply === 'hang') return new Promise<Response>(() => {});
    const field = body.operationName === 'ChargeCard' ? 'chargeCard' : 'chargeStatus';
    const json =
      reply && 'error' in reply
        ? { errors: [{ message: reply.error, extensions: { code: reply.error } }] }
        : { data: { [field]: reply ? payload(body.variables.idempotencyKey, reply) : null } };
    return new Response(JSON.stringify(json), { status: 200, headers: { 'Content-Type': 'application/json' } });
  }) as typeof globalThis.fetch;
  const checkout = new Checkout({
    storage,
    clock: timersClock,
    createSession: async (cartId, captureMethod) => {
      carts.push(cartId);
      methods.push(captureMethod);
      return shop(cartId, captureMethod);
    },
    charger: (s, onEvent) =>
      createCharger({
        endpoint: 'http://shop.test/graphql',
        publishableKey: s.publishableKey,
        session: s.clientSecret,
        storage,
        live: 'poll',
        retry: demoRetry,
        crossTab: false,
        // full jitter may draw 0 ms: a retry would land inside flush()
        environment: { random: () => 0.5, navigate: (url) => void navigations.push(url), location },
        fetch,
        onEvent,
        mintKey: () => `${opts.keyPrefix ?? ''}key-${++keys}`,
      }),
    endpoint: (publishableKey) => ({ url: 'http://shop.test/graphql', fetch, publishableKey }),
    mintKey: () => `${opts.keyPrefix ?? ''}key-${++keys}`,
    mintCartId: () => `cart${++cartIds}`,
    observer: { event() {}, state() {}, returned: (key, from) => void returns.push({ key, from }) },
  });
  const phases: Shown['kind'][] = [];
  checkout.subscribe((s) => {
    if (phases.at(-1) !== shownOf(s).kind) phases.push(shownOf(s).kind);
  });
  return {
    checkout,
    sent,
    carts,
    methods,
    phases,
    storage,
    navigations,
    returns,
    location,
    charges: () => sent.filter((s) => s.operationName === 'ChargeCard'),
    /** Which display the page shows now. */
    shown: () => shownOf(checkout.state),
    answer(...r: (Reply | ((s: Sent) => Reply))[]) {
      replies = r.map((x) => (typeof x === 'function' ? x : () => x));
    },
    shop(fn: (cartId: string) => SessionAnswer) {
      shop = fn;
    },
    pay(card = 'pm_card_visa', captureMethod?: CaptureMethod) {
      checkout.pay(card, opts.unsafe, captureMethod);
    },
  };
}

const flush = (ms = 0) => vi.advanceTimersByTimeAsync(ms);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('the checkout over a charger', () => {
  it("asks the shop for the cart's session, then pays it with a new key: one chargeCard", async () => {
    const p = page();
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    expect(p.shown().kind).toBe('paying');
    expect(canPay(p.checkout.state)).toBe(false); // a double click is ignored
    p.pay();
    await flush();
    expect(p.carts).toEqual(['cart1']);
    expect(p.charges()).toEqual([
      { operationName: 'ChargeCard', query: expect.any(String), variables: { idempotencyKey: 'key-1', input: { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_cart1' } } },
    ]);
    expect(p.checkout.state.charger).toMatchObject({ kind: 'settled', attempt: { key: 'key-1' }, outcome: { status: 'SUCCEEDED' } });
    expect(p.phases).toEqual(['paying', 'final']);
  });

  it('a lost answer is retried by the charger with the same key, and the page says why', async () => {
    const p = page();
    p.answer('lost', { status: 'SUCCEEDED', replayed: true });
    p.pay();
    await flush();
    // The charger says why it sends again, and the page shows it.
    expect(p.shown()).toMatchObject({ kind: 'paying', c: { kind: 'retrying', cause: 'network' } });
    await flush(demoRetry.capMs);
    expect(p.charges().map((c) => c.variables.idempotencyKey)).toEqual(['key-1', 'key-1']);
    expect(p.shown()).toMatchObject({ kind: 'final', c: { outcome: { replayed: true } } });
  });

  it('a busy server is retried with the same key after the wait it asked for', async () => {
    const p = page();
    p.answer({ error: 'SERVICE_UNAVAILABLE' }, { status: 'SUCCEEDED' });
    p.pay();
    await flush();
    expect(p.shown()).toMatchObject({ kind: 'paying', c: { kind: 'retrying', cause: 'SERVICE_UNAVAILABLE' } });
    await flush(demoRetry.capMs);
    expect(p.charges().map((c) => c.variables.idempotencyKey)).toEqual(['key-1', 'key-1']);
    expect(p.shown().kind).toBe('final');
  });

  it('every try lost: unknown, and Pay sends the same key again', async () => {
    const p = page();
    p.answer('lost', 'lost', 'lost', 'lost');
    p.pay();
    await flush(4 * demoRetry.capMs);
    expect(p.shown().kind).toBe('unknown');
    expect(p.checkout.state.charger).toMatchObject({ kind: 'unknown', attempt: { key: 'key-1' } });
    expect(p.checkout.state.charger).not.toHaveProperty('error'); // no answer: no code
    expect(p.charges()).toHaveLength(demoRetry.maxAttempts);
    expect(p.checkout.startNew()).toBe(false); // a new key now could charge twice
    p.answer({ status: 'SUCCEEDED', replayed: true });
    p.pay('pm_card_chargeDeclined'); // the card is the attempt's, whatever is picked
    await flush();
    expect(p.charges().at(-1)!.variables).toMatchObject({ idempotencyKey: 'key-1', input: { paymentMethod: 'pm_card_visa' } });
    expect(p.shown().kind).toBe('final');
  });

  it('a decline: Try another card is a new key on the same session', async () => {
    const p = page();
    p.answer({ status: 'FAILED' });
    p.pay('pm_card_chargeDeclined');
    await flush();
    expect(p.shown()).toMatchObject({ kind: 'final', c: { outcome: { status: 'FAILED' } } });
    expect(p.checkout.startNew()).toBe(true);
    expect(p.shown()).toEqual({ kind: 'idle' });
    expect(attemptOf(p.checkout.state)).toBeNull();
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    await flush();
    expect(p.charges().map((c) => [c.variables.idempotencyKey, c.variables.input!.checkoutSession])).toEqual([
      ['key-1', 'cs_cart1'],
      ['key-2', 'cs_cart1'],
    ]);
    expect(p.carts).toEqual(['cart1']);
  });

  it('after a success, the next purchase is a new cart, and the old attempt record is gone', async () => {
    const p = page();
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    await flush();
    const records = () => [...p.storage.items.keys()].filter((k) => k.startsWith('chargeonce:attempt:'));
    expect(records()).toHaveLength(1);
    expect(p.checkout.startNew()).toBe(true);
    expect(records()).toHaveLength(0);
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    await flush();
    expect(p.carts).toEqual(['cart1', 'cart2']);
    expect(p.charges().map((c) => c.variables.input!.checkoutSession)).toEqual(['cs_cart1', 'cs_cart2']);
  });

  it('a session that can no longer be paid offers a new checkout: a new cart', async () => {
    const p = page();
    p.answer({ error: 'CHECKOUT_SESSION_PAID' });
    p.pay();
    await flush();
    expect(p.shown()).toMatchObject({ kind: 'refused', c: { error: { code: 'CHECKOUT_SESSION_PAID' } } });
    expect(sessionEnded(p.checkout.state)).toBe(true);
    expect(canPay(p.checkout.state)).toBe(false);
    expect(p.checkout.startNew()).toBe(true);
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    await flush();
    expect(p.carts).toEqual(['cart1', 'cart2']);
  });

  it("the shop gives no session: nothing is sent to chargeonce, and Pay asks again for the same cart", async () => {
    const p = page();
    p.shop(() => ({ error: { code: null, message: 'Failed to fetch' } }));
    p.pay();
    await flush();
    expect(p.shown()).toEqual({ kind: 'noSession', code: null, message: 'Failed to fetch' });
    expect(p.sent).toEqual([]);
    p.shop((cartId) => ({ session: session(cartId) }));
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    await flush();
    expect(p.carts).toEqual(['cart1', 'cart1']);
    expect(p.shown().kind).toBe('final');
  });

  it('a slow chargeCard is asked about with chargeStatus, and shows PROCESSING while it is open', async () => {
    const p = page();
    p.answer('hang', { status: 'PROCESSING' });
    p.pay('pm_card_slow');
    await flush(999);
    expect(p.sent.map((s) => s.operationName)).toEqual(['ChargeCard']);
    await flush(1);
    expect(p.sent.map((s) => s.operationName)).toEqual(['ChargeCard', 'ChargeStatus']);
    expect(p.sent[1].variables).toEqual({ idempotencyKey: 'key-1', checkoutSession: 'cs_cart1' });
    // The charger still sends; the page shows what chargeStatus said of it.
    expect(p.shown()).toMatchObject({ kind: 'processing', c: { kind: 'sending', attempt: { key: 'key-1' } } });
    expect(p.checkout.state.page.slow).toMatchObject({ key: 'key-1', checks: 1 });
  });

  it('a reload resumes the attempt by its key: a new page over the same storage sends the same key', async () => {
    const storage = new MemoryStorage();
    const first = page(storage);
    first.answer('hang');
    first.pay();
    await flush();
    expect(first.charges()).toHaveLength(1);
    first.checkout.dispose();

    const again = page(storage);
    again.answer({ status: 'SUCCEEDED', replayed: true });
    again.checkout.start();
    expect(again.shown().kind).toBe('resuming');
    await flush();
    expect(again.charges().map((c) => c.variables.idempotencyKey)).toEqual(['key-1']);
    expect(again.carts).toEqual([]); // the cart kept its session
    expect(again.checkout.state.charger).toMatchObject({ kind: 'settled', attempt: { key: 'key-1' }, outcome: { replayed: true } });
  });
});

describe('unsafe mode, beside the charger', () => {
  it('a lost answer is retried with a NEW key on a NEW session: two payments', async () => {
    const p = page(new MemoryStorage(), { unsafe: true });
    p.answer('lost', { status: 'SUCCEEDED' });
    p.pay();
    await flush();
    // The naive sender tells its retry in the library's words: the page draws it as the charger's.
    expect(p.shown()).toMatchObject({ kind: 'paying', c: { kind: 'retrying', cause: 'network' } });
    await flush(1_000);
    expect(p.charges().map((c) => [c.variables.idempotencyKey, c.variables.input!.checkoutSession])).toEqual([
      ['key-1', 'cs_cart1'],
      ['key-2', 'cs_cart2'],
    ]);
    // The shopper's one payment keeps its first key; the retry's went under another.
    expect(p.checkout.state.charger).toMatchObject({ kind: 'settled', attempt: { key: 'key-1' }, outcome: { status: 'SUCCEEDED', key: 'key-2' } });
    // The library's record holds nothing: the naive sender keeps no key.
    expect([...p.storage.items.keys()].filter((k) => k.startsWith('chargeonce:attempt:'))).toEqual([]);
  });
});

describe('customer authentication (3-D Secure): to the bank and back', () => {
  const authCard = 'pm_card_authenticationRequired';
  const back = (key = 'key-1', cart = 'cart1') => ({ search: `?cart=${cart}&chargeonce_key=${key}` });

  /** A first page that paid the card and went to the bank: the storage it leaves. */
  async function wentToTheBank() {
    const first = page();
    first.answer({ status: 'PROCESSING', action: true });
    first.pay(authCard);
    await flush();
    expect(first.checkout.authenticate()).toBe(true);
    first.checkout.dispose();
    return first;
  }

  it('PROCESSING with a nextAction is the action phase: no Pay, Authenticate navigates, nothing is sent again', async () => {
    const p = page();
    p.answer({ status: 'PROCESSING', action: true }, { status: 'PROCESSING', action: true });
    p.pay(authCard);
    await flush();
    expect(p.shown()).toMatchObject({ kind: 'action', nextAction: { url: challengeUrl, expiresAt: nextAction.expiresAt } });
    expect(p.checkout.state.charger).toMatchObject({ kind: 'following', attempt: { key: 'key-1', input: { paymentMethod: authCard } } });
    expect(p.checkout.state.page.leaving).toBe(false);
    expect(isBack(p.checkout.state)).toBe(false);
    expect(canPay(p.checkout.state)).toBe(false);
    p.pay(authCard); // a click on a Pay that is hidden anyway
    expect(p.checkout.startNew()).toBe(false); // a new key now could charge twice
    // The charger follows the waiting attempt by reading it: chargeStatus, never chargeCard.
    await flush(1_000);
    expect(p.sent.map((s) => s.operationName)).toEqual(['ChargeCard', 'ChargeStatus']);
    expect(p.navigations).toEqual([]);

    expect(p.checkout.authenticate()).toBe(true);
    expect(p.navigations).toEqual([challengeUrl]);
    expect(p.shown().kind).toBe('action');
    expect(p.checkout.state.page.leaving).toBe(true);
    // The attempt is in storage with its key, its input and the bank's question.
    const record = [...p.storage.items].find(([k]) => k.startsWith('chargeonce:attempt:'))![1];
    expect(JSON.parse(record)).toMatchObject({ key: 'key-1', status: 'open', input: { paymentMethod: authCard }, nextAction: { url: challengeUrl } });
    expect(p.phases).toEqual(['paying', 'action']);
  });

  it('Authenticate outside the action phase does nothing', async () => {
    const p = page();
    expect(p.checkout.authenticate()).toBe(false);
    p.answer({ status: 'SUCCEEDED' });
    p.pay();
    await flush();
    expect(p.checkout.authenticate()).toBe(false);
    expect(p.navigations).toEqual([]);
  });

  it('a page restored from the back/forward cache after Authenticate offers it again', async () => {
    const p = page();
    p.answer({ status: 'PROCESSING', action: true });
    p.pay(authCard);
    await flush();
    p.checkout.authenticate();
    p.checkout.shown();
    expect(p.shown().kind).toBe('action');
    expect(p.checkout.state.page.leaving).toBe(false);
  });

  it('the return, storage kept: the stored key and card again, which answers the outcome; no new session', async () => {
    const first = await wentToTheBank();
    const ret = page(first.storage, { location: back() });
    ret.answer({ status: 'SUCCEEDED' });
    const started = ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'AUTOMATIC' });
    expect(ret.shown()).toEqual({ kind: 'resuming', back: true });
    await started;
    await flush();
    expect(ret.charges()).toEqual([
      expect.objectContaining({ variables: { idempotencyKey: 'key-1', input: { paymentMethod: authCard, checkoutSession: 'cs_cart1' } } }),
    ]);
    expect(ret.sent).toHaveLength(1);
    expect(ret.carts).toEqual([]);
    expect(ret.returns).toEqual([{ key: 'key-1', from: 'storage' }]);
    expect(ret.checkout.state.charger).toMatchObject({ kind: 'settled', attempt: { key: 'key-1' }, outcome: { status: 'SUCCEEDED' } });
  });

  it('the return before the bank told chargeonce: action again, marked as the return, then the outcome by reading', async () => {
    const first = await wentToTheBank();
    const ret = page(first.storage, { location: back() });
    ret.answer({ status: 'PROCESSING', action: true }, { status: 'SUCCEEDED' });
    void ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'AUTOMATIC' });
    await flush();
    expect(ret.shown().kind).toBe('action');
    expect(isBack(ret.checkout.state)).toBe(true);
    expect(ret.checkout.state.page.leaving).toBe(false);
    await flush(1_000);
    expect(ret.sent.map((s) => s.operationName)).toEqual(['ChargeCard', 'ChargeStatus']);
    expect(ret.shown()).toMatchObject({ kind: 'final', c: { outcome: { status: 'SUCCEEDED' } } });
  });

  it('a reload of the return (its address tidied) still knows the shopper has been to the bank; a new checkout forgets it', async () => {
    const first = await wentToTheBank();
    const reloaded = page(first.storage);
    reloaded.answer({ status: 'PROCESSING', action: true }, { status: 'SUCCEEDED' });
    reloaded.checkout.start();
    expect(reloaded.shown()).toEqual({ kind: 'resuming', back: true });
    await flush();
    expect(reloaded.shown().kind).toBe('action');
    expect(isBack(reloaded.checkout.state)).toBe(true);
    await flush(1_000);
    expect(reloaded.shown().kind).toBe('final');
    expect(reloaded.checkout.startNew()).toBe(true);
    reloaded.answer({ status: 'PROCESSING', action: true });
    reloaded.pay(authCard);
    await flush();
    expect(reloaded.shown().kind).toBe('action');
    expect(isBack(reloaded.checkout.state)).toBe(false);
  });

  it('the return, storage lost: the cart from the address gets its session again, and the key is only asked about', async () => {
    await wentToTheBank();
    const location = back();
    const ret = page(new MemoryStorage(), { location });
    ret.answer({ status: 'SUCCEEDED' });
    const started = ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'AUTOMATIC' });
    expect(ret.shown()).toEqual({ kind: 'resuming', back: true });
    await started;
    // resume() has read the address: the page may drop the key from it now.
    location.search = '';
    await flush();
    expect(ret.carts).toEqual(['cart1']);
    expect(ret.charges()).toEqual([]);
    expect(ret.sent).toEqual([
      expect.objectContaining({ operationName: 'ChargeStatus', variables: { idempotencyKey: 'key-1', checkoutSession: 'cs_cart1' } }),
    ]);
    expect(ret.returns).toEqual([{ key: 'key-1', from: 'address' }]);
    // The card of a key from the address is not known here.
    expect(ret.checkout.state.charger).toMatchObject({ kind: 'settled', attempt: { key: 'key-1', input: null } });
    // A success is the end of the cart: the next purchase is a new one.
    expect(ret.checkout.startNew()).toBe(true);
    expect(ret.shown()).toEqual({ kind: 'idle' });
    expect(attemptOf(ret.checkout.state)).toBeNull();
  });

  it('the return, storage lost, and the shop gives no session: nothing is asked, and the page says so', async () => {
    const ret = page(new MemoryStorage(), { location: back() });
    ret.shop(() => ({ error: { code: null, message: 'Failed to fetch' } }));
    await ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'AUTOMATIC' });
    await flush();
    expect(ret.sent).toEqual([]);
    expect(ret.shown()).toEqual({ kind: 'noSession', code: null, message: 'Failed to fetch' });
  });

  it('authentication failed at the bank: FAILED authentication_failed, and Try another card is a new key on the same session', async () => {
    const first = await wentToTheBank();
    const ret = page(first.storage, { location: back(), keyPrefix: 'return-' });
    ret.answer({ status: 'FAILED', failure: 'authentication_failed' });
    await ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'AUTOMATIC' });
    await flush();
    expect(ret.shown()).toMatchObject({ kind: 'final', c: { outcome: { status: 'FAILED', failure: { code: 'authentication_failed' } } } });
    expect(ret.checkout.startNew()).toBe(true);
    ret.answer({ status: 'SUCCEEDED' });
    ret.pay();
    await flush();
    expect(ret.charges().map((c) => [c.variables.idempotencyKey, c.variables.input!.checkoutSession])).toEqual([
      ['key-1', 'cs_cart1'],
      ['return-key-1', 'cs_cart1'],
    ]);
  });

  it('a key from the address whose outcome stays unknown: Pay asks about it again, never charges it', async () => {
    const ret = page(new MemoryStorage(), { location: back() });
    ret.answer({ error: 'UNAUTHENTICATED' });
    await ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'AUTOMATIC' });
    await flush();
    expect(ret.shown().kind).toBe('unknown');
    ret.answer({ status: 'SUCCEEDED' });
    ret.pay();
    await flush();
    expect(ret.charges()).toEqual([]);
    expect(ret.sent.map((s) => [s.operationName, s.variables.idempotencyKey])).toEqual([
      ['ChargeStatus', 'key-1'],
      ['ChargeStatus', 'key-1'],
    ]);
    expect(ret.shown().kind).toBe('final');
  });

  it("capture later: the cart's session is asked for with MANUAL, which then fixes it; the outcome is the library's authorization", async () => {
    const p = page();
    expect(p.checkout.captureMethod).toBeNull(); // no session yet: the shopper chooses
    p.answer({ status: 'SUCCEEDED', held: true });
    p.pay('pm_card_visa', 'MANUAL');
    await flush();
    expect(p.methods).toEqual(['MANUAL']);
    expect(p.checkout.captureMethod).toBe('MANUAL');
    // The page sends only the card: the session says how the money is taken.
    expect(p.charges()[0]!.variables.input).toEqual({ paymentMethod: 'pm_card_visa', checkoutSession: 'cs_cart1' });
    expect(p.shown()).toMatchObject({
      kind: 'final',
      c: { outcome: { status: 'SUCCEEDED', charge: { captureStatus: 'UNCAPTURED', amountCapturable: 11300, authorizationExpiresAt: '2099-01-08T00:00:00Z' } } },
    });
    // A new checkout is a new cart, whose method the shopper chooses again.
    expect(p.checkout.startNew()).toBe(true);
    expect(p.checkout.captureMethod).toBeNull();
    p.answer({ status: 'SUCCEEDED' });
    p.pay('pm_card_visa', 'AUTOMATIC');
    await flush();
    expect(p.methods).toEqual(['MANUAL', 'AUTOMATIC']);
  });

  it("after a decline the cart's session keeps its method, whatever the shopper chooses for the next card", async () => {
    const p = page();
    p.answer({ status: 'FAILED' });
    p.pay('pm_card_chargeDeclined', 'MANUAL');
    await flush();
    expect(p.checkout.startNew()).toBe(true); // Try another card: the same session
    p.answer({ status: 'SUCCEEDED', held: true });
    p.pay('pm_card_visa', 'AUTOMATIC');
    await flush();
    expect(p.methods).toEqual(['MANUAL']);
    expect(p.checkout.captureMethod).toBe('MANUAL');
    expect(p.charges().map((c) => c.variables.input!.checkoutSession)).toEqual(['cs_cart1', 'cs_cart1']);
  });

  it('the return, storage lost, of a cart that only authorizes: its session is asked for again with MANUAL, as it was made', async () => {
    const ret = page(new MemoryStorage(), { location: back() });
    ret.answer({ status: 'SUCCEEDED', held: true });
    await ret.checkout.start({ key: 'key-1', cartId: 'cart1', captureMethod: 'MANUAL' });
    await flush();
    expect(ret.carts).toEqual(['cart1']);
    expect(ret.methods).toEqual(['MANUAL']);
    expect(ret.shown()).toMatchObject({ kind: 'final', c: { outcome: { charge: { captureStatus: 'UNCAPTURED' } } } });
  });
});
