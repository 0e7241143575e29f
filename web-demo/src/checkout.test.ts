// Every transition of the checkout state machine, driven by a fake
// transport (each answer released by the test: the shop's backend too), a
// fake clock and a memory storage.
import { CombinedError } from '@urql/core';
import { describe, expect, it } from 'vitest';
import { attemptStorageKey, type KeyValueStorage } from './attempt';
import { cartStorageKey, type CheckoutSession, type SessionAnswer } from './cart';
import {
  Checkout,
  canPay,
  isBusy,
  sessionEnded,
  sessionEndedCodes,
  liveConnectMsDefault,
  liveRecheckMsDefault,
  patienceMsDefault,
  resultArrived,
  retryNote,
  type Answer,
  type CheckoutState,
  type CheckoutTransport,
  type Clock,
  type LiveHandlers,
  type Phase,
} from './checkout';
import type { ChargeCardInput, ChargeResultFragment, ChargeStatus } from './generated/graphql';
import { pollDelayMs, pollPolicy } from './retry';
import type { RequestRecord } from './transport';

class MemoryStorage implements KeyValueStorage {
  readonly items = new Map<string, string>();
  getItem = (k: string) => this.items.get(k) ?? null;
  setItem = (k: string, v: string) => void this.items.set(k, v);
  removeItem = (k: string) => void this.items.delete(k);
}

/** A clock whose time moves only when the test says. */
class FakeClock implements Clock {
  private t = 1_000_000;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  now = () => this.t;
  setTimeout = (fn: () => void, ms: number) => {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  };
  clearTimeout = (h: unknown) => void this.timers.delete(h as number);
  get pending(): number {
    return this.timers.size;
  }
  /** Moves time on by ms, firing the timers due on the way, in order. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= end && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
      await settled();
    }
    this.t = end;
  }
}

/** Lets every promise chain that can run, run. */
const settled = () => new Promise<void>((r) => setTimeout(r, 0));

interface Call {
  key: string;
  signal?: AbortSignal;
  answer(a: Answer): Promise<void>;
}

/** A transport whose every answer the test gives, when it wants. */
class FakeTransport implements CheckoutTransport {
  readonly sessions: { cartId: string; answer(a: SessionAnswer): Promise<void> }[] = [];
  readonly charges: (Call & { input: ChargeCardInput })[] = [];
  readonly statuses: Call[] = [];
  createSession(cartId: string): Promise<SessionAnswer> {
    return new Promise((resolve) =>
      this.sessions.push({
        cartId,
        answer: async (a) => {
          resolve(a);
          await settled();
        },
      }),
    );
  }
  chargeCard(key: string, input: ChargeCardInput, signal: AbortSignal): Promise<Answer> {
    return new Promise((resolve) => this.charges.push({ key, input, signal, answer: release(resolve) }));
  }
  chargeStatus(key: string): Promise<Answer> {
    return new Promise((resolve) => this.statuses.push({ key, answer: release(resolve) }));
  }
}

/** A subscription the fake transport opened: the test sends its states, or fails it. */
interface Watch {
  key: string;
  stopped: boolean;
  next(p: ChargeResultFragment): Promise<void>;
  failed(reason: string): Promise<void>;
}

/** The fake transport, with live status. */
class LiveTransport extends FakeTransport {
  readonly watches: Watch[] = [];
  watch(key: string, handlers: LiveHandlers): () => void {
    const w: Watch = {
      key,
      stopped: false,
      next: async (p) => {
        handlers.next(p);
        await settled();
      },
      failed: async (reason) => {
        handlers.failed(reason);
        await settled();
      },
    };
    this.watches.push(w);
    return () => {
      w.stopped = true;
    };
  }
}

const release = (resolve: (a: Answer) => void) => async (a: Answer) => {
  resolve(a);
  await settled();
};

const visa: ChargeCardInput = { paymentMethod: 'pm_card_visa' };
const slow: ChargeCardInput = { paymentMethod: 'pm_card_slow' };

/** What the shop's backend answers for a cart. */
function session(cartId: string, over: Partial<CheckoutSession> = {}): CheckoutSession {
  return {
    id: `session-of-${cartId}`,
    clientSecret: `cs_${cartId}`,
    publishableKey: 'co_pk_demo',
    amount: 11300,
    currency: 'USD',
    orderId: null,
    status: 'OPEN',
    expiresAt: '2026-11-30T12:00:00Z',
    replayed: false,
    ...over,
  };
}
/** The input an attempt on cart-0 (the cart setup starts with) is bound to. */
const onCart0 = (input: ChargeCardInput) => ({ ...input, checkoutSession: 'cs_cart-0' });

function result(status: ChargeStatus, over: Partial<ChargeResultFragment> = {}): ChargeResultFragment {
  return {
    idempotencyKey: 'key-1',
    status,
    replayed: false,
    retryAfterMs: status === 'PROCESSING' ? 1000 : null,
    expiresAt: status === 'PROCESSING' ? null : '2026-11-30T12:00:00Z',
    charge:
      status === 'SUCCEEDED'
        ? { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-11-29T12:00:00Z' }
        : null,
    failure: status === 'FAILED' ? { code: 'card_declined', message: 'Your card was declined.' } : null,
    ...over,
  };
}

const answer = (status: ChargeStatus, over: Partial<ChargeResultFragment> = {}): Answer => ({ payload: result(status, over) });
const lostForGood: Answer = { error: new CombinedError({ networkError: new TypeError('Failed to fetch') }) };
const busyForGood: Answer = {
  error: new CombinedError({ graphQLErrors: [{ message: 'busy', extensions: { code: 'RATE_LIMITED', retryAfterMs: 100 } }] }),
};
const reused: Answer = {
  error: new CombinedError({ graphQLErrors: [{ message: 'key reused with another input', extensions: { code: 'IDEMPOTENCY_KEY_REUSED' } }] }),
};
const unknownKey: Answer = { payload: null };

function record(outcome: RequestRecord['outcome'], over: Partial<RequestRecord> = {}): RequestRecord {
  return { n: 1, operation: 'ChargeCard', idempotencyKey: 'key-1', sentAt: '', outcome, ...over };
}

/**
 * A checkout on fakes. Its cart, cart-0, has its checkout session already
 * (the shop's backend answered it earlier), unless session is false; the
 * carts after it are cart-1, cart-2…
 */
function setup<T extends FakeTransport = FakeTransport>(opts: { storage?: MemoryStorage; transport?: T; session?: CheckoutSession | false } = {}) {
  const storage = opts.storage ?? new MemoryStorage();
  if (!storage.getItem(cartStorageKey)) {
    const s = opts.session === false ? null : (opts.session ?? session('cart-0'));
    storage.setItem(cartStorageKey, JSON.stringify({ cartId: 'cart-0', session: s, publishableKey: s?.publishableKey ?? null }));
  }
  const clock = new FakeClock();
  const transport = opts.transport ?? (new FakeTransport() as T);
  let minted = 0;
  let carts = 0;
  const checkout = new Checkout({ transport, clock, storage, mintKey: () => `key-${++minted}`, mintCartId: () => `cart-${++carts}` });
  const history: CheckoutState[] = [];
  checkout.subscribe((next) => history.push(next));
  const phase = () => checkout.state.phase;
  const kinds = () => history.map((s) => s.phase.kind);
  return { checkout, clock, transport, storage, phase, kinds, history, minted: () => minted };
}

/** The phase, narrowed, or a failed test. */
function as<K extends Phase['kind']>(p: Phase, kind: K): Extract<Phase, { kind: K }> {
  expect(p.kind).toBe(kind);
  return p as Extract<Phase, { kind: K }>;
}

describe('Checkout: paying', () => {
  it('starts idle, and Pay can be pressed', () => {
    const { checkout } = setup();
    checkout.start();
    expect(checkout.state).toEqual({ attempt: null, phase: { kind: 'idle' } });
    expect(canPay(checkout.state)).toBe(true);
  });

  it('idle → paying → final SUCCEEDED: one key, minted when paying, and the attempt is settled', async () => {
    const { checkout, transport, phase, kinds, storage } = setup();
    checkout.start();
    checkout.pay(visa);
    expect(phase()).toEqual({ kind: 'paying', retry: null });
    expect(checkout.state.attempt).toMatchObject({ key: 'key-1', state: 'open', input: onCart0(visa) });
    expect(isBusy(checkout.state)).toBe(true);
    expect(canPay(checkout.state)).toBe(false);

    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(as(phase(), 'final').payload.status).toBe('SUCCEEDED');
    expect(checkout.state.attempt?.state).toBe('SUCCEEDED');
    expect(JSON.parse(storage.getItem(attemptStorageKey)!)).toMatchObject({ key: 'key-1', state: 'SUCCEEDED' });
    expect(canPay(checkout.state)).toBe(false);
    expect(transport.charges.map((c) => c.key)).toEqual(['key-1']);
    expect(kinds()).toEqual(['idle', 'paying', 'final']);
  });

  it('paying → final FAILED, then startNew → idle, and the next payment gets a new key', async () => {
    const { checkout, transport, phase } = setup();
    checkout.pay({ ...visa, paymentMethod: 'pm_card_chargeDeclined' });
    await transport.charges[0].answer(answer('FAILED'));
    expect(as(phase(), 'final').payload.failure?.code).toBe('card_declined');
    expect(checkout.state.attempt?.state).toBe('FAILED');

    expect(checkout.startNew()).toBe(true);
    expect(checkout.state).toEqual({ attempt: null, phase: { kind: 'idle' } });
    checkout.pay(visa);
    expect(transport.charges.map((c) => c.key)).toEqual(['key-1', 'key-2']);
  });

  it('ignores Pay while paying: a double click sends one request', () => {
    const { checkout, transport } = setup();
    checkout.pay(visa);
    checkout.pay(visa);
    expect(transport.charges).toHaveLength(1);
  });

  it('refuses startNew while the outcome is unknown', async () => {
    const { checkout, transport, phase } = setup();
    checkout.pay(visa);
    expect(checkout.startNew()).toBe(false);
    await transport.charges[0].answer(lostForGood);
    expect(checkout.startNew()).toBe(false);
    expect(phase().kind).toBe('unknown');
  });

  it('network failed for good → unknown, Pay enabled, and Pay sends the same key and input', async () => {
    const { checkout, transport, phase, minted } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(lostForGood);
    expect(phase()).toEqual({ kind: 'unknown', code: null });
    expect(isBusy(checkout.state)).toBe(false);
    expect(canPay(checkout.state)).toBe(true);

    checkout.pay({ ...visa, paymentMethod: 'pm_card_mastercard' }); // the card is locked: the attempt's input is sent
    expect(phase()).toEqual({ kind: 'paying', retry: null });
    expect(transport.charges.map((c) => [c.key, c.input.paymentMethod])).toEqual([
      ['key-1', 'pm_card_visa'],
      ['key-1', 'pm_card_visa'],
    ]);
    expect(minted()).toBe(1);
    await transport.charges[1].answer(answer('SUCCEEDED', { replayed: true }));
    expect(as(phase(), 'final').payload.replayed).toBe(true);
  });

  it('a busy server on every try → unknown with its code, Pay enabled', async () => {
    const { checkout, transport, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(busyForGood);
    expect(phase()).toEqual({ kind: 'unknown', code: 'RATE_LIMITED' });
    expect(canPay(checkout.state)).toBe(true);
  });

  it('an error that is an answer → refused with its message and code; Pay sends the same key', async () => {
    const { checkout, transport, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(reused);
    expect(phase()).toEqual({ kind: 'refused', message: 'key reused with another input', code: 'IDEMPOTENCY_KEY_REUSED' });
    expect(canPay(checkout.state)).toBe(true);
    checkout.pay(visa);
    expect(transport.charges.map((c) => c.key)).toEqual(['key-1', 'key-1']);
  });

  it('a transport that throws is a network error', async () => {
    const { checkout, transport, phase } = setup();
    transport.chargeCard = () => Promise.reject(new TypeError('Failed to fetch'));
    checkout.pay(visa);
    await settled();
    expect(phase()).toEqual({ kind: 'unknown', code: null });
  });
});

describe('Checkout: the checkout session', () => {
  it('a cart without a session asks the shop first, then pays the session with its client secret', async () => {
    const { checkout, transport, phase, storage } = setup({ session: false });
    checkout.pay(visa);
    expect(phase()).toEqual({ kind: 'paying', retry: null });
    expect(checkout.state.attempt).toBeNull();
    expect(transport.sessions.map((s) => s.cartId)).toEqual(['cart-0']);
    expect(transport.charges).toHaveLength(0);
    checkout.pay(visa); // a double click while the shop answers
    expect(transport.sessions).toHaveLength(1);

    await transport.sessions[0].answer({ session: session('cart-0') });
    expect(transport.charges.map((c) => [c.key, c.input])).toEqual([['key-1', onCart0(visa)]]);
    expect(checkout.state.attempt).toMatchObject({ key: 'key-1', state: 'open', input: onCart0(visa) });
    expect(JSON.parse(storage.getItem(cartStorageKey)!)).toMatchObject({
      cartId: 'cart-0',
      publishableKey: 'co_pk_demo',
      session: { clientSecret: 'cs_cart-0' },
    });
    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(phase().kind).toBe('final');
  });

  it('no session from the shop → noSession, nothing sent to chargeonce; Pay asks again for the same cart', async () => {
    const { checkout, transport, phase, history } = setup({ session: false });
    checkout.pay(visa);
    await transport.sessions[0].answer({ error: { code: null, message: 'Failed to fetch' } });
    expect(phase()).toEqual({ kind: 'noSession', code: null, message: 'Failed to fetch' });
    expect(resultArrived(history.at(-2)!, checkout.state)).toBe(true);
    expect(canPay(checkout.state)).toBe(true);
    expect(transport.charges).toHaveLength(0);

    checkout.pay(visa);
    await transport.sessions[1].answer({ error: { code: 'SERVICE_UNAVAILABLE', message: 'the database is unavailable' } });
    expect(phase()).toEqual({ kind: 'noSession', code: 'SERVICE_UNAVAILABLE', message: 'the database is unavailable' });
    checkout.pay(visa);
    await transport.sessions[2].answer({ session: session('cart-0') });
    expect(transport.sessions.map((s) => s.cartId)).toEqual(['cart-0', 'cart-0', 'cart-0']);
    expect(transport.charges.map((c) => c.key)).toEqual(['key-1']);
  });

  it('a transport that throws is no answer from the shop', async () => {
    const { checkout, transport, phase } = setup({ session: false });
    transport.createSession = () => Promise.reject(new TypeError('Failed to fetch'));
    checkout.pay(visa);
    await settled();
    expect(phase()).toEqual({ kind: 'noSession', code: null, message: 'Failed to fetch' });
  });

  it.each(['PAID', 'EXPIRED'] as const)('a cart whose session is %s is done: a new cart asks once more', async (status) => {
    const { checkout, transport, phase } = setup({ session: false });
    checkout.pay(visa);
    await transport.sessions[0].answer({ session: session('cart-0', { status }) });
    expect(transport.sessions.map((s) => s.cartId)).toEqual(['cart-0', 'cart-1']);
    await transport.sessions[1].answer({ session: session('cart-1') });
    expect(transport.charges.map((c) => c.input.checkoutSession)).toEqual(['cs_cart-1']);
    expect(phase()).toEqual({ kind: 'paying', retry: null });
  });

  it('a new cart whose session is not open either → noSession, with the status as its code', async () => {
    const { checkout, transport, phase } = setup({ session: false });
    checkout.pay(visa);
    await transport.sessions[0].answer({ session: session('cart-0', { status: 'EXPIRED' }) });
    await transport.sessions[1].answer({ session: session('cart-1', { status: 'EXPIRED' }) });
    expect(phase()).toEqual({ kind: 'noSession', message: "The shop's checkout session is EXPIRED.", code: 'CHECKOUT_SESSION_EXPIRED' });
    expect(transport.charges).toHaveLength(0);
  });

  it('a stored session past its expiry is not paid: the shop is asked again', async () => {
    const { checkout, transport } = setup({ session: session('cart-0', { expiresAt: '1970-01-01T00:00:01Z' }) });
    checkout.pay(visa);
    expect(transport.sessions.map((s) => s.cartId)).toEqual(['cart-0']);
    expect(transport.charges).toHaveLength(0);
  });

  it('after a decline, the next attempt pays the same session with a new key', async () => {
    const { checkout, transport } = setup();
    checkout.pay({ paymentMethod: 'pm_card_chargeDeclined' });
    await transport.charges[0].answer(answer('FAILED'));
    checkout.startNew();
    checkout.pay(visa);
    expect(transport.sessions).toHaveLength(0);
    expect(transport.charges.map((c) => [c.key, c.input.checkoutSession])).toEqual([
      ['key-1', 'cs_cart-0'],
      ['key-2', 'cs_cart-0'],
    ]);
  });

  it('after a success, the next purchase is a new cart with a new session', async () => {
    const { checkout, transport } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(checkout.startNew()).toBe(true);
    checkout.pay(visa);
    expect(transport.sessions.map((s) => s.cartId)).toEqual(['cart-1']);
    await transport.sessions[0].answer({ session: session('cart-1') });
    expect(transport.charges.map((c) => [c.key, c.input.checkoutSession])).toEqual([
      ['key-1', 'cs_cart-0'],
      ['key-2', 'cs_cart-1'],
    ]);
  });

  it.each([...sessionEndedCodes])('%s: the session can no longer be paid; Pay is off, and startNew starts a new cart', async (code) => {
    const { checkout, transport, phase, storage } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer({ error: new CombinedError({ graphQLErrors: [{ message: 'no', extensions: { code } }] }) });
    expect(phase()).toEqual({ kind: 'refused', message: 'no', code });
    expect(sessionEnded(checkout.state)).toBe(true);
    expect(canPay(checkout.state)).toBe(false);
    checkout.pay(visa);
    expect(transport.charges).toHaveLength(1);

    expect(checkout.startNew()).toBe(true);
    expect(checkout.state).toEqual({ attempt: null, phase: { kind: 'idle' } });
    expect(storage.getItem(attemptStorageKey)).toBeNull();
    checkout.pay(visa);
    expect(transport.sessions.map((s) => s.cartId)).toEqual(['cart-1']);
  });

  it('startNew is refused after a refusal that leaves the session open', async () => {
    const { checkout, transport } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(reused);
    expect(sessionEnded(checkout.state)).toBe(false);
    expect(checkout.startNew()).toBe(false);
  });

  it("the shop's late answer after dispose is ignored", async () => {
    const { checkout, transport } = setup({ session: false });
    checkout.pay(visa);
    checkout.dispose();
    await transport.sessions[0].answer({ session: session('cart-0') });
    expect(transport.charges).toHaveLength(0);
  });
});

describe('Checkout: retries the client makes', () => {
  it('a lost response → paying with the reason, then the retry is answered', async () => {
    const { checkout, transport, phase } = setup();
    checkout.pay(visa);
    checkout.observe(record('pending'));
    checkout.observe(record('network-error', { fault: 'drop-response' }));
    expect(phase()).toEqual({ kind: 'paying', retry: { kind: 'lost' } });
    checkout.observe(record('pending', { n: 2 }));
    checkout.observe(record('answered', { n: 2, status: 'SUCCEEDED', replayed: true }));
    await transport.charges[0].answer(answer('SUCCEEDED', { replayed: true }));
    expect(as(phase(), 'final').payload.replayed).toBe(true);
  });

  it('a busy answer → paying with the code and the wait the server asked for', () => {
    const { checkout, phase } = setup();
    checkout.pay(visa);
    checkout.observe(record('pending'));
    checkout.observe(record('graphql-error', { detail: 'SERVICE_UNAVAILABLE', retryAfterMs: 2000 }));
    expect(phase()).toEqual({ kind: 'paying', retry: { kind: 'busy', code: 'SERVICE_UNAVAILABLE', retryAfterMs: 2000 } });
  });

  it('an answer that is not retried leaves paying as it is until the call resolves', () => {
    const { checkout, phase } = setup();
    checkout.pay(visa);
    checkout.observe(record('pending'));
    checkout.observe(record('graphql-error', { detail: 'IDEMPOTENCY_KEY_REUSED' }));
    expect(phase()).toEqual({ kind: 'paying', retry: null });
  });

  it('ignores chargeStatus records, and records while nothing is being paid', () => {
    const { checkout, phase, clock } = setup();
    checkout.observe(record('network-error'));
    expect(phase()).toEqual({ kind: 'idle' });
    checkout.pay(visa);
    checkout.observe(record('network-error', { operation: 'SessionChargeStatus' }));
    expect(phase()).toEqual({ kind: 'paying', retry: null });
    checkout.observe(record('pending', { operation: 'SessionChargeStatus' }));
    expect(clock.pending).toBe(0);
  });

  it.each([
    [record('network-error'), { kind: 'lost' }],
    [record('graphql-error', { detail: 'RATE_LIMITED', retryAfterMs: 100 }), { kind: 'busy', code: 'RATE_LIMITED', retryAfterMs: 100 }],
    [record('graphql-error', { detail: 'INTERNAL_SERVER_ERROR' }), { kind: 'busy', code: 'INTERNAL_SERVER_ERROR', retryAfterMs: null }],
    [record('graphql-error', { detail: 'BAD_USER_INPUT' }), null],
    [record('answered', { status: 'SUCCEEDED' }), null],
    [record('abandoned'), null],
  ])('retryNote(%j) = %j', (r, want) => {
    expect(retryNote(r)).toEqual(want);
  });
});

describe('Checkout: PROCESSING', () => {
  it('paying → processing: counts down retryAfterMs second by second, then asks chargeStatus with the same key', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 3000 }));
    let p = as(phase(), 'processing');
    expect(p).toMatchObject({ key: 'key-1', checks: 0, remainingMs: 3000, checking: false, charging: false });

    await clock.advance(1000);
    expect(as(phase(), 'processing').remainingMs).toBe(2000);
    await clock.advance(1000);
    expect(as(phase(), 'processing').remainingMs).toBe(1000);
    expect(transport.statuses).toHaveLength(0);
    await clock.advance(999);
    expect(transport.statuses).toHaveLength(0);
    await clock.advance(1);
    p = as(phase(), 'processing');
    expect(p).toMatchObject({ checking: true, remainingMs: 0 });
    expect(transport.statuses.map((s) => s.key)).toEqual(['key-1']);

    await transport.statuses[0].answer(answer('SUCCEEDED', { replayed: true }));
    expect(as(phase(), 'final').payload.status).toBe('SUCCEEDED');
    expect(checkout.state.attempt?.state).toBe('SUCCEEDED');
    expect(clock.pending).toBe(0);
  });

  it('a countdown that is not whole seconds shows the next whole second first', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 2500 }));
    expect(as(phase(), 'processing').remainingMs).toBe(2500);
    await clock.advance(500);
    expect(as(phase(), 'processing').remainingMs).toBe(2000);
  });

  it('processing → processing: polls at the pace the server asks, then backs off', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 1000 }));
    const waits: number[] = [];
    for (let i = 0; i < pollPolicy.steadyPolls + 2; i++) {
      const p = as(phase(), 'processing');
      waits.push(p.remainingMs);
      expect(p.checks).toBe(i);
      await clock.advance(p.remainingMs);
      await transport.statuses[i].answer(answer('PROCESSING', { retryAfterMs: 1000 }));
    }
    expect(waits).toEqual([...Array(pollPolicy.steadyPolls).fill(1000), 2000, 4000]);
    expect(as(phase(), 'processing').remainingMs).toBe(pollDelayMs(1000, pollPolicy.steadyPolls + 2));
  });

  it('keeps asking after a chargeStatus that got no answer', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING'));
    await clock.advance(1000);
    await transport.statuses[0].answer(lostForGood);
    expect(as(phase(), 'processing')).toMatchObject({ checks: 1, checking: false });
    await clock.advance(1000);
    await transport.statuses[1].answer(answer('FAILED'));
    expect(as(phase(), 'final').payload.status).toBe('FAILED');
  });

  it('processing → refused when chargeStatus answers an error that is an answer', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING'));
    await clock.advance(1000);
    await transport.statuses[0].answer(reused);
    expect(phase().kind).toBe('refused');
  });

  it('polls the key of the answer: in unsafe mode, the retry key', async () => {
    const { checkout, transport, clock } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { idempotencyKey: 'retry-key' }));
    await clock.advance(1000);
    expect(transport.statuses.map((s) => s.key)).toEqual(['retry-key']);
  });

  it('Pay is ignored while processing', async () => {
    const { checkout, transport } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING'));
    checkout.pay(visa);
    expect(transport.charges).toHaveLength(1);
  });
});

describe('Checkout: a slow bank (chargeCard open for longer than the patience)', () => {
  it('asks chargeStatus with the same key after patienceMs, shows PROCESSING, and settles with chargeCard', async () => {
    const { checkout, transport, clock, phase, kinds } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault - 1);
    expect(transport.statuses).toHaveLength(0);
    await clock.advance(1);
    expect(transport.statuses.map((s) => s.key)).toEqual(['key-1']);
    expect(phase()).toEqual({ kind: 'paying', retry: null });

    await transport.statuses[0].answer(answer('PROCESSING', { retryAfterMs: 1000 }));
    expect(as(phase(), 'processing')).toMatchObject({ charging: true, checks: 1, remainingMs: 1000 });
    await clock.advance(1000);
    await transport.statuses[1].answer(answer('PROCESSING', { retryAfterMs: 800 }));
    expect(as(phase(), 'processing')).toMatchObject({ charging: true, checks: 2, remainingMs: 800 });

    checkout.observe(record('answered', { status: 'SUCCEEDED', replayed: false }));
    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(as(phase(), 'final').payload.replayed).toBe(false);
    expect(clock.pending).toBe(0);
    expect(kinds()).toEqual(['paying', 'processing', 'processing', 'processing', 'final']);
    // No question is left pending: the countdown stopped with the answer.
    await clock.advance(10_000);
    expect(transport.statuses).toHaveLength(2);
  });

  it('a fast answer asks nothing', async () => {
    const { checkout, transport, clock } = setup();
    checkout.pay(visa);
    checkout.observe(record('pending'));
    await clock.advance(100);
    checkout.observe(record('answered', { status: 'SUCCEEDED' }));
    await transport.charges[0].answer(answer('SUCCEEDED'));
    await clock.advance(10_000);
    expect(transport.statuses).toHaveLength(0);
  });

  it('settles with a final chargeStatus answer when it comes first, and ignores the late chargeCard answer', async () => {
    const { checkout, transport, clock, phase, history } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(answer('SUCCEEDED', { replayed: true }));
    expect(as(phase(), 'final').payload.replayed).toBe(true);
    const changes = history.length;
    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(history).toHaveLength(changes);
  });

  it('an unknown key (not claimed yet) or no answer keeps paying, and asks again after patienceMs', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(unknownKey);
    expect(phase()).toEqual({ kind: 'paying', retry: null });
    await clock.advance(patienceMsDefault);
    await transport.statuses[1].answer(lostForGood);
    expect(phase()).toEqual({ kind: 'paying', retry: null });
    await clock.advance(patienceMsDefault);
    expect(transport.statuses).toHaveLength(3);
  });

  it('while processing, no answer to a question keeps counting down', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(answer('PROCESSING'));
    await clock.advance(1000);
    await transport.statuses[1].answer(lostForGood);
    expect(as(phase(), 'processing')).toMatchObject({ charging: true, checks: 2, checking: false });
  });

  it('a request lost while processing → paying with the reason; its retry is asked about again', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(answer('PROCESSING'));
    checkout.observe(record('network-error'));
    expect(phase()).toEqual({ kind: 'paying', retry: { kind: 'lost' } });
    expect(clock.pending).toBe(0);
    checkout.observe(record('pending', { n: 3 }));
    await clock.advance(patienceMsDefault);
    expect(transport.statuses).toHaveLength(2);
  });

  it('the answer to a question still on its way when chargeCard resolves is ignored', async () => {
    const { checkout, transport, clock, phase } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 5000 }));
    expect(as(phase(), 'processing')).toMatchObject({ charging: false, remainingMs: 5000 });
    await transport.statuses[0].answer(answer('SUCCEEDED'));
    expect(as(phase(), 'processing')).toMatchObject({ remainingMs: 5000 });
  });

  it('startNew drops a chargeCard still open after a chargeStatus settled the attempt', async () => {
    const { checkout, transport, clock } = setup();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(answer('SUCCEEDED'));
    expect(transport.charges[0].signal?.aborted).toBe(false);
    checkout.startNew();
    expect(transport.charges[0].signal?.aborted).toBe(true);
  });
});

describe('Checkout: a reload', () => {
  function stored(state: 'open' | 'SUCCEEDED' | 'FAILED', input = visa) {
    const storage = new MemoryStorage();
    storage.setItem(attemptStorageKey, JSON.stringify({ key: 'stored-key', input: onCart0(input), state, startedAt: '2026-11-29T12:00:00Z' }));
    return storage;
  }

  it('resuming → processing → final: picks the attempt up by its key', async () => {
    const { checkout, transport, clock, phase } = setup({ storage: stored('open', slow) });
    checkout.start();
    expect(phase()).toEqual({ kind: 'resuming' });
    expect(checkout.state.attempt).toMatchObject({ key: 'stored-key', input: onCart0(slow) });
    expect(isBusy(checkout.state)).toBe(true);
    expect(canPay(checkout.state)).toBe(false);
    expect(transport.statuses.map((s) => s.key)).toEqual(['stored-key']);

    await transport.statuses[0].answer(answer('PROCESSING', { idempotencyKey: 'stored-key' }));
    expect(as(phase(), 'processing')).toMatchObject({ key: 'stored-key', charging: false });
    await clock.advance(1000);
    await transport.statuses[1].answer(answer('SUCCEEDED', { idempotencyKey: 'stored-key', replayed: true }));
    expect(phase().kind).toBe('final');
    expect(checkout.state.attempt?.state).toBe('SUCCEEDED');
    expect(transport.charges).toHaveLength(0);
  });

  it('resuming → final for an attempt that finished before the reload', async () => {
    const { checkout, transport, phase } = setup({ storage: stored('SUCCEEDED') });
    checkout.start();
    await transport.statuses[0].answer(answer('SUCCEEDED', { idempotencyKey: 'stored-key', replayed: true }));
    expect(phase().kind).toBe('final');
  });

  it('resuming → notReached when the server never got the open attempt; Pay sends its key', async () => {
    const { checkout, transport, phase } = setup({ storage: stored('open') });
    checkout.start();
    await transport.statuses[0].answer(unknownKey);
    expect(phase()).toEqual({ kind: 'notReached' });
    expect(canPay(checkout.state)).toBe(true);
    checkout.pay({ ...visa, paymentMethod: 'pm_card_mastercard' });
    expect(transport.charges.map((c) => [c.key, c.input.paymentMethod])).toEqual([['stored-key', 'pm_card_visa']]);
  });

  it('resuming → idle when the server has forgotten a finished attempt', async () => {
    const { checkout, transport, storage } = setup({ storage: stored('SUCCEEDED') });
    checkout.start();
    await transport.statuses[0].answer(unknownKey);
    expect(checkout.state).toEqual({ attempt: null, phase: { kind: 'idle' } });
    expect(storage.getItem(attemptStorageKey)).toBeNull();
  });

  it('resuming → unknown when the server cannot be reached, and Pay is enabled', async () => {
    const { checkout, transport, phase } = setup({ storage: stored('open') });
    checkout.start();
    await transport.statuses[0].answer(lostForGood);
    expect(phase()).toEqual({ kind: 'unknown', code: null });
    expect(canPay(checkout.state)).toBe(true);
  });
});

describe('Checkout: live status (chargeUpdated)', () => {
  const live = (storage?: MemoryStorage) => setup({ transport: new LiveTransport(), storage });

  it('processing → subscribed, no countdown, and the final state from the subscription settles the attempt', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 1000 }));
    expect(as(phase(), 'processing')).toMatchObject({ key: 'key-1', live: 'connecting' });
    expect(transport.watches.map((w) => w.key)).toEqual(['key-1']);

    await transport.watches[0].next(result('PROCESSING'));
    expect(as(phase(), 'processing').live).toBe('subscribed');
    // No question while the server pushes: well past retryAfterMs.
    await clock.advance(10_000);
    expect(transport.statuses).toHaveLength(0);

    await transport.watches[0].next(result('SUCCEEDED', { replayed: true }));
    expect(as(phase(), 'final').payload.status).toBe('SUCCEEDED');
    expect(checkout.state.attempt?.state).toBe('SUCCEEDED');
    expect(transport.watches[0].stopped).toBe(true);
    expect(clock.pending).toBe(0);
  });

  it('a slow bank: the subscription settles first, and the late chargeCard answer is ignored', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(answer('PROCESSING'));
    expect(as(phase(), 'processing')).toMatchObject({ charging: true, live: 'connecting' });
    await transport.watches[0].next(result('PROCESSING'));
    await transport.watches[0].next(result('FAILED'));
    expect(as(phase(), 'final').payload.status).toBe('FAILED');

    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(as(phase(), 'final').payload.status).toBe('FAILED');
    expect(transport.watches).toHaveLength(1);
  });

  it('chargeCard answering first closes the subscription', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(slow);
    checkout.observe(record('pending'));
    await clock.advance(patienceMsDefault);
    await transport.statuses[0].answer(answer('PROCESSING'));
    await transport.watches[0].next(result('PROCESSING'));
    await transport.charges[0].answer(answer('SUCCEEDED'));
    expect(as(phase(), 'final').payload.status).toBe('SUCCEEDED');
    expect(transport.watches[0].stopped).toBe(true);
    await transport.watches[0].next(result('FAILED')); // too late, and from a closed subscription
    expect(as(phase(), 'final').payload.status).toBe('SUCCEEDED');
  });

  it('cannot connect → polls with the countdown, and says live status is unavailable', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 2000 }));
    await transport.watches[0].failed('closed 1006');
    expect(as(phase(), 'processing')).toMatchObject({ live: 'unavailable', remainingMs: 2000, checking: false });
    await clock.advance(2000);
    expect(transport.statuses.map((s) => s.key)).toEqual(['key-1']);
    await transport.statuses[0].answer(answer('PROCESSING'));
    // It stays on polling for this attempt: no second subscription.
    expect(as(phase(), 'processing').live).toBe('unavailable');
    expect(transport.watches).toHaveLength(1);
  });

  it('no answer within liveConnectMs → polls', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 1000 }));
    await clock.advance(liveConnectMsDefault - 1);
    expect(as(phase(), 'processing').live).toBe('connecting');
    await clock.advance(1);
    expect(as(phase(), 'processing').live).toBe('unavailable');
    expect(transport.watches[0].stopped).toBe(true);
    await clock.advance(1000);
    expect(transport.statuses).toHaveLength(1);
  });

  it('a subscription that drops after it was subscribed → polls', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 1000 }));
    await transport.watches[0].next(result('PROCESSING'));
    await transport.watches[0].failed('closed 1001');
    expect(as(phase(), 'processing').live).toBe('unavailable');
    await clock.advance(1000);
    await transport.statuses[0].answer(answer('SUCCEEDED', { replayed: true }));
    expect(as(phase(), 'final').payload.status).toBe('SUCCEEDED');
  });

  it('while subscribed, asks chargeStatus now and then anyway, and keeps the subscription', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING'));
    await transport.watches[0].next(result('PROCESSING'));
    await clock.advance(liveRecheckMsDefault - 1);
    expect(transport.statuses).toHaveLength(0);
    await clock.advance(1);
    expect(transport.statuses).toHaveLength(1);
    await transport.statuses[0].answer(answer('PROCESSING'));
    expect(as(phase(), 'processing').live).toBe('subscribed');
    expect(transport.watches).toHaveLength(1);
    expect(transport.watches[0].stopped).toBe(false);
    await transport.watches[0].next(result('SUCCEEDED'));
    expect(phase().kind).toBe('final');
  });

  it('an error from the subscription (an unknown key) → polls, and chargeStatus decides', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 500 }));
    await transport.watches[0].failed('NOT_FOUND');
    await clock.advance(500);
    await transport.statuses[0].answer(unknownKey);
    expect(phase().kind).toBe('notReached');
  });

  it('a reload: resuming → subscribed → final', async () => {
    const storage = new MemoryStorage();
    storage.setItem(attemptStorageKey, JSON.stringify({ key: 'stored-key', input: onCart0(slow), state: 'open', startedAt: '2026-11-29T12:00:00Z' }));
    const { checkout, transport, phase } = live(storage);
    checkout.start();
    await transport.statuses[0].answer(answer('PROCESSING', { idempotencyKey: 'stored-key' }));
    expect(transport.watches.map((w) => w.key)).toEqual(['stored-key']);
    await transport.watches[0].next(result('PROCESSING', { idempotencyKey: 'stored-key' }));
    await transport.watches[0].next(result('SUCCEEDED', { idempotencyKey: 'stored-key' }));
    expect(phase().kind).toBe('final');
    expect(checkout.state.attempt?.state).toBe('SUCCEEDED');
    expect(transport.statuses).toHaveLength(1);
  });

  it('a new attempt subscribes again, even after the last one fell back to polling', async () => {
    const { checkout, transport, clock, phase } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING', { retryAfterMs: 500 }));
    await transport.watches[0].failed('closed 1006');
    await clock.advance(500);
    await transport.statuses[0].answer(answer('SUCCEEDED'));
    expect(checkout.startNew()).toBe(true);
    checkout.pay(visa); // a new cart: its session first
    await transport.sessions[0].answer({ session: session('cart-1') });
    await transport.charges[1].answer(answer('PROCESSING', { idempotencyKey: 'key-2' }));
    expect(transport.watches.map((w) => w.key)).toEqual(['key-1', 'key-2']);
    expect(as(phase(), 'processing').live).toBe('connecting');
  });

  it('dispose ends the subscription', async () => {
    const { checkout, transport, clock } = live();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING'));
    checkout.dispose();
    expect(transport.watches[0].stopped).toBe(true);
    expect(clock.pending).toBe(0);
  });
});

describe('Checkout: plumbing', () => {
  it('resultArrived: from waiting to something to say', () => {
    const s = (phase: Phase): CheckoutState => ({ attempt: null, phase });
    const paying = s({ kind: 'paying', retry: null });
    expect(resultArrived(paying, s({ kind: 'final', payload: result('SUCCEEDED') }))).toBe(true);
    expect(resultArrived(paying, s({ kind: 'unknown', code: null }))).toBe(true);
    expect(resultArrived(s({ kind: 'resuming' }), s({ kind: 'notReached' }))).toBe(true);
    expect(resultArrived(paying, s({ kind: 'paying', retry: { kind: 'lost' } }))).toBe(false);
    expect(resultArrived(s({ kind: 'final', payload: result('SUCCEEDED') }), s({ kind: 'final', payload: result('SUCCEEDED') }))).toBe(false);
    expect(resultArrived(s({ kind: 'idle' }), s({ kind: 'paying', retry: null }))).toBe(false);
  });

  it('dispose stops the countdown and ignores later answers', async () => {
    const { checkout, transport, clock, history } = setup();
    checkout.pay(visa);
    await transport.charges[0].answer(answer('PROCESSING'));
    const changes = history.length;
    checkout.dispose();
    expect(clock.pending).toBe(0);
    await clock.advance(60_000);
    expect(transport.statuses).toHaveLength(0);
    expect(history).toHaveLength(changes);
  });

  it('tells each listener the state before and after', () => {
    const { checkout } = setup();
    const seen: [string, string][] = [];
    const off = checkout.subscribe((next, prev) => seen.push([prev.phase.kind, next.phase.kind]));
    checkout.pay(visa);
    off();
    checkout.pay(visa);
    expect(seen).toEqual([['idle', 'paying']]);
  });
});
