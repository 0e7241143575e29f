// The shop's side of the checkout: the cart the page pays, and the checkout
// session that the shop's backend creates for it.
//
// The page never holds the merchant's secret key. It asks the shop's backend
// (in development, chargeonce serves a small one at /demo/checkout-session)
// to fix what is to be paid: the backend calls createCheckoutSession with the
// secret key and answers the session's client secret and the publishable key
// the page pays it with. The route is idempotent on the cart's id, so a
// retry, a reload or a second attempt after a decline gets the same session
// back. A paid cart is done: the next purchase is a new cart, with a new id.
import type { CaptureMethod, KeyValueStorage } from '@chargeonce/client';
import { postToBackend } from './backend';

export type CheckoutSessionStatus = 'OPEN' | 'PAID' | 'EXPIRED';

/** What the shop's backend answers: the session, and how the page pays it. */
export interface CheckoutSession {
  id: string;
  /** The capability to pay this session, with the publishable key. */
  clientSecret: string;
  publishableKey: string;
  amount: number;
  currency: string;
  orderId: string | null;
  /** MANUAL: the session's charge only authorizes, and the shop captures when it ships (order.ts). */
  captureMethod: CaptureMethod;
  status: CheckoutSessionStatus;
  expiresAt: string;
  replayed: boolean;
}

/** What the page asks the shop's backend for. */
export interface SessionRequest {
  /** 1..100 printable ASCII characters, no spaces: the route is idempotent on it. */
  cartId: string;
  amount: number;
  currency: string;
  orderId?: string;
  description?: string;
  /** Where the bank sends the shopper back after authenticating (3-D Secure): on the demo's own origin. */
  returnUrl?: string;
  /** MANUAL: authorize now, capture when the order ships. Part of what the cart's session is keyed on. */
  captureMethod?: CaptureMethod;
}

/**
 * The query parameter of the return URL that names the cart. The bank
 * sends the shopper back with the attempt's key (chargeonce_key); when this
 * tab's storage lost the cart meanwhile, the cart's id is how the page gets
 * its checkout session back from the shop's backend (idempotent on it), and
 * so can ask about that key at all: a publishable key reads only the
 * attempts of a session it names.
 */
export const returnCartParam = 'cart';

/**
 * The query parameter of the return URL that says the cart only
 * authorizes (capture=manual): the cart's session is keyed on the cart
 * and what it pays, so asking for it again needs its capture method too.
 */
export const returnCaptureParam = 'capture';

/** The return URL of cartId's session: the checkout page itself (origin and path), naming the cart (and that it only authorizes). */
export function returnUrlOf(page: { origin: string; pathname: string }, cartId: string, captureMethod: CaptureMethod = 'AUTOMATIC'): string {
  const u = new URL(page.pathname, page.origin);
  u.searchParams.set(returnCartParam, cartId);
  if (captureMethod === 'MANUAL') u.searchParams.set(returnCaptureParam, 'manual');
  return u.toString();
}

/** The backend's session, or why there is none: code is null when no answer arrived. */
export type SessionAnswer = { session: CheckoutSession } | { error: { code: string | null; message: string } };

export const checkoutSessionPath = '/demo/checkout-session';

/** Asks the shop's backend for the checkout session of a cart. It never throws. */
export async function requestCheckoutSession(req: SessionRequest, base: typeof fetch = fetch): Promise<SessionAnswer> {
  const answer = await postToBackend(checkoutSessionPath, req, base);
  if (!answer.ok) return { error: answer.error };
  const s = answer.body as Partial<CheckoutSession> | null;
  if (typeof s?.clientSecret !== 'string' || typeof s.publishableKey !== 'string' || typeof s.status !== 'string') {
    return { error: { code: null, message: `HTTP ${answer.status}: no checkout session in the answer` } };
  }
  return { session: { ...s, captureMethod: s.captureMethod === 'MANUAL' ? 'MANUAL' : 'AUTOMATIC' } as CheckoutSession };
}

export const cartStorageKey = 'chargeonce-demo:cart';

interface StoredCart {
  cartId: string;
  /** The cart's session, once the backend answered it. */
  session: CheckoutSession | null;
  /** The key of the last session; the next cart's is the same. */
  publishableKey: string | null;
}

/** A new cart id: `cart_` and a random UUID, well within the route's 100 characters. */
export const mintCartId = () => `cart_${crypto.randomUUID()}`;

/**
 * The current cart, kept in sessionStorage beside the attempt: its id, minted
 * once per purchase, and the session the backend answered for it.
 */
export class CartStore {
  constructor(
    private readonly storage: KeyValueStorage,
    private readonly mintId: () => string = mintCartId,
  ) {}

  /** The current cart's id; a cart is started when there is none. */
  id(): string {
    return this.load().cartId;
  }

  /** The cart's session while it may be paid (OPEN and not expired at now, epoch ms), or null. */
  session(now: number): CheckoutSession | null {
    const s = this.load().session;
    if (!s || s.status !== 'OPEN' || !(Date.parse(s.expiresAt) > now)) return null;
    return s;
  }

  /** Keeps the session the backend answered for the current cart. */
  keep(session: CheckoutSession): void {
    this.save({ ...this.load(), session, publishableKey: session.publishableKey });
  }

  /** How the current cart's session takes the money, once the backend gave one: fixed for the cart from then on. */
  captureMethod(): CaptureMethod | null {
    const s = this.load().session;
    return s ? (s.captureMethod ?? 'AUTOMATIC') : null;
  }

  /** The publishable key the page pays with, once a session named it. */
  publishableKey(): string | null {
    return this.load().publishableKey;
  }

  /**
   * Takes up the cart a return from the bank names, when this tab holds no
   * payable session (its storage lost the cart): the shop's backend then
   * gives the cart's session again (keep).
   */
  adopt(cartId: string): void {
    const c = this.load();
    if (c.cartId !== cartId) this.save({ cartId, session: null, publishableKey: c.publishableKey });
  }

  /** Starts a new cart, with a new id and no session: the next purchase. */
  renew(): string {
    const next: StoredCart = { cartId: this.mintId(), session: null, publishableKey: this.load().publishableKey };
    this.save(next);
    return next.cartId;
  }

  private load(): StoredCart {
    const raw = this.storage.getItem(cartStorageKey);
    if (raw) {
      try {
        const c = JSON.parse(raw) as StoredCart;
        if (typeof c.cartId === 'string' && c.cartId) {
          return { cartId: c.cartId, session: c.session ?? null, publishableKey: c.publishableKey ?? null };
        }
      } catch {
        // Unreadable: a new cart.
      }
    }
    const fresh: StoredCart = { cartId: this.mintId(), session: null, publishableKey: null };
    this.save(fresh);
    return fresh;
  }

  private save(c: StoredCart): void {
    this.storage.setItem(cartStorageKey, JSON.stringify(c));
  }
}
