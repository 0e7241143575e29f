// The shop's side of the checkout (cart.ts): what the page asks the shop's
// backend for and how it reads the answer, and the cart kept across reloads.
import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './fakes';
import {
  CartStore,
  cartStorageKey,
  checkoutSessionPath,
  mintCartId,
  requestCheckoutSession,
  returnCaptureParam,
  returnCartParam,
  returnUrlOf,
  type CheckoutSession,
} from './cart';

const open: CheckoutSession = {
  id: '0b4c8d8e-1111-4a4a-9c9c-000000000001',
  clientSecret: 'cs_secret',
  publishableKey: 'co_pk_demo',
  amount: 11300,
  currency: 'USD',
  orderId: null,
  captureMethod: 'AUTOMATIC',
  status: 'OPEN',
  expiresAt: '2026-11-29T13:00:00Z',
  replayed: false,
};

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

describe('requestCheckoutSession', () => {
  it('posts the cart as JSON to the shop backend route, and answers its session', async () => {
    const sent: { url: string; init?: RequestInit }[] = [];
    const answer = await requestCheckoutSession({ cartId: 'cart_1', amount: 11300, currency: 'USD' }, async (url, init) => {
      sent.push({ url: String(url), init });
      return json(200, open);
    });
    expect(answer).toEqual({ session: open });
    expect(sent).toHaveLength(1);
    expect(sent[0].url).toBe(checkoutSessionPath);
    expect(sent[0].init?.method).toBe('POST');
    expect(new Headers(sent[0].init?.headers).get('Content-Type')).toBe('application/json');
    expect(JSON.parse(String(sent[0].init?.body))).toEqual({ cartId: 'cart_1', amount: 11300, currency: 'USD' });
    // The page sends no key of any kind: the backend holds the secret one.
    expect(new Headers(sent[0].init?.headers).has('Authorization')).toBe(false);
  });

  it.each([
    [409, 'IDEMPOTENCY_KEY_REUSED', 'the cart was asked for with another amount'],
    [400, 'BAD_USER_INPUT', 'cartId: 1..100 printable characters'],
    [503, 'SERVICE_UNAVAILABLE', 'the database is unavailable'],
  ])('HTTP %i: the error code and message of the answer', async (status, code, message) => {
    const answer = await requestCheckoutSession({ cartId: 'c', amount: 1, currency: 'USD' }, async () =>
      json(status, { error: { code, message } }),
    );
    expect(answer).toEqual({ error: { code, message } });
  });

  it('no answer (a network error, or not the backend answering) has no code', async () => {
    const ask = (f: typeof fetch) => requestCheckoutSession({ cartId: 'c', amount: 1, currency: 'USD' }, f);
    expect(await ask(() => Promise.reject(new TypeError('Failed to fetch')))).toEqual({ error: { code: null, message: 'Failed to fetch' } });
    expect(await ask(async () => new Response('<html>bad gateway', { status: 502 }))).toEqual({
      error: { code: null, message: "HTTP 502: not an answer of the shop's backend" },
    });
    expect(await ask(async () => json(200, { id: 'x' }))).toMatchObject({ error: { code: null } });
  });
});

describe('CartStore', () => {
  const now = Date.parse('2026-11-29T12:00:00Z');

  it('mints a cart id once, and keeps it across pages of the same tab', () => {
    const storage = new MemoryStorage();
    let n = 0;
    const id = new CartStore(storage, () => `cart-${++n}`).id();
    expect(id).toBe('cart-1');
    expect(new CartStore(storage, () => 'never').id()).toBe('cart-1');
  });

  it('a minted cart id is what the route takes: 1..100 printable ASCII characters, no spaces', () => {
    expect(mintCartId()).toMatch(/^[!-~]{1,100}$/);
    expect(mintCartId()).not.toBe(mintCartId());
  });

  it('keeps the session and its publishable key; hands the session out only while it may be paid', () => {
    const storage = new MemoryStorage();
    const carts = new CartStore(storage, () => 'cart-1');
    expect(carts.session(now)).toBeNull();
    expect(carts.publishableKey()).toBeNull();
    carts.keep(open);
    expect(carts.session(now)).toEqual(open);
    expect(carts.publishableKey()).toBe('co_pk_demo');
    expect(carts.session(Date.parse(open.expiresAt))).toBeNull();
    carts.keep({ ...open, status: 'PAID' });
    expect(carts.session(now)).toBeNull();
  });

  it('renew starts a new cart, without a session, and keeps the publishable key', () => {
    const storage = new MemoryStorage();
    let n = 0;
    const carts = new CartStore(storage, () => `cart-${++n}`);
    carts.keep(open);
    expect(carts.renew()).toBe('cart-2');
    expect(carts.id()).toBe('cart-2');
    expect(carts.session(now)).toBeNull();
    expect(carts.publishableKey()).toBe('co_pk_demo');
  });

  it('an unreadable record is a new cart', () => {
    const storage = new MemoryStorage();
    storage.setItem(cartStorageKey, '{not json');
    expect(new CartStore(storage, () => 'cart-new').id()).toBe('cart-new');
  });

  it('adopt takes up the cart a return from the bank names, without a session, so that the backend gives it again', () => {
    const storage = new MemoryStorage();
    const carts = new CartStore(storage, () => 'cart-fresh');
    carts.adopt('cart_from_the_address');
    expect(carts.id()).toBe('cart_from_the_address');
    expect(carts.session(now)).toBeNull();
    carts.keep(open);
    carts.adopt('cart_from_the_address'); // the same cart: its session stays
    expect(carts.session(now)).toEqual(open);
  });
});

describe('the return URL', () => {
  it('is the checkout page itself, naming the cart, without the rest of the address', () => {
    const url = returnUrlOf({ origin: 'http://127.0.0.1:8080', pathname: '/' }, 'cart_1');
    expect(url).toBe(`http://127.0.0.1:8080/?${returnCartParam}=cart_1`);
    expect(returnUrlOf({ origin: 'https://shop.example', pathname: '/checkout' }, 'cart 2')).toBe('https://shop.example/checkout?cart=cart+2');
  });

  it('is sent with the cart to the shop backend', async () => {
    let body = '';
    await requestCheckoutSession({ cartId: 'c', amount: 1, currency: 'USD', returnUrl: 'http://127.0.0.1/?cart=c' }, async (_url, init) => {
      body = String(init?.body);
      return json(200, open);
    });
    expect(JSON.parse(body)).toMatchObject({ cartId: 'c', returnUrl: 'http://127.0.0.1/?cart=c' });
  });
});

describe('capture later', () => {
  const now = Date.parse('2026-11-29T12:00:00Z');

  it("sends MANUAL with the cart, and reads the session's method; an answer without one takes the money at once", async () => {
    let body = '';
    const manual = { ...open, captureMethod: 'MANUAL' as const };
    const answer = await requestCheckoutSession({ cartId: 'c', amount: 1, currency: 'USD', captureMethod: 'MANUAL' }, async (_url, init) => {
      body = String(init?.body);
      return json(200, manual);
    });
    expect(JSON.parse(body)).toMatchObject({ cartId: 'c', captureMethod: 'MANUAL' });
    expect(answer).toEqual({ session: manual });
    const { captureMethod: _, ...older } = open;
    await expect(requestCheckoutSession({ cartId: 'c', amount: 1, currency: 'USD' }, async () => json(200, older))).resolves.toEqual({
      session: { ...older, captureMethod: 'AUTOMATIC' },
    });
  });

  it("the cart's method is its session's, once it has one", () => {
    const carts = new CartStore(new MemoryStorage(), () => 'cart_1');
    expect(carts.captureMethod()).toBeNull();
    carts.keep({ ...open, captureMethod: 'MANUAL' });
    expect(carts.captureMethod()).toBe('MANUAL');
    expect(carts.session(now)).toMatchObject({ captureMethod: 'MANUAL' });
    carts.renew();
    expect(carts.captureMethod()).toBeNull();
  });

  it('the return URL of a cart that only authorizes says so, so that its session can be asked for again as it was made', () => {
    const page = { origin: 'http://127.0.0.1:8080', pathname: '/' };
    expect(returnUrlOf(page, 'cart_1', 'MANUAL')).toBe(`http://127.0.0.1:8080/?${returnCartParam}=cart_1&${returnCaptureParam}=manual`);
    expect(returnUrlOf(page, 'cart_1', 'AUTOMATIC')).toBe(`http://127.0.0.1:8080/?${returnCartParam}=cart_1`);
  });
});
