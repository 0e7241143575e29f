// The checkout: a thin view over one Charger (@chargeonce/client) per
// checkout session. The charger owns the client's half of the guarantee:
// the key minted once per attempt and persisted before the first byte, the
// narrow retry loop with the same key, PROCESSING followed live (or polled),
// resume after a reload, and typed errors. The page's state is the
// charger's state as it is (checkout-state.ts), with beside it only what is
// the page's own:
//
//   - the cart and its checkout session, from the shop's backend (cart.ts):
//     Pay first asks for the session when the cart has none (noSession when
//     the shop gives none), with the shopper's capture method (MANUAL: the
//     charge only authorizes, and the order is shipped later, order.ts);
//   - the resume that has not answered yet, after a reload or on the return;
//   - the question about a slow chargeCard (slow.ts), to show PROCESSING
//     while the request is still open;
//   - unsafe mode (unsafe.ts): a naive sender beside the charger, which
//     takes every retry for a new order, to show the double charge;
//   - the countdown to the charger's next chargeStatus, a second at a time;
//   - the way to the bank and back (3-D Secure): Authenticate hands the page
//     to charger.handleNextAction(), and the return resumes, with the cart
//     from the address when this tab's storage lost it.
//
//   idle ──Pay──▶ (session?) ──▶ charger.pay ──▶ sending ⇄ retrying ──▶ settled | following | unknown | rejected
//   following with nextAction ──Authenticate──▶ the bank's page ──▶ (the return: chargeonce_key) ──▶ charger.resume() ──▶ settled
//   settled FAILED ──Try another card──▶ reset: a new key, the same session
//   settled SUCCEEDED, or rejected CHECKOUT_SESSION_PAID/_EXPIRED/_LOCKED ──Start a new checkout──▶ a new cart
//   (reload) ──▶ charger.resume(): the same key, to its outcome
import type { CaptureMethod, ChargeCardInput, Charger, ChargerEvent, ChargerState, KeyValueStorage } from '@chargeonce/client';
import { CartStore, mintCartId, type CheckoutSession, type SessionAnswer } from './cart';
import { send, type Endpoint } from './request';
import { SlowWatch, type Clock } from './slow';
import { payNaively } from './unsafe';

export type { Clock };

import {
  canPay,
  demoRetry,
  idleState,
  sessionEnded,
  shownOf,
  type ChargerObserver,
  type CheckoutState,
  type Listener,
  type PageStep,
  type ReturnSource,
} from './checkout-state';

export * from './checkout-state';

export interface CheckoutOptions {
  /** Where the cart survives a reload: sessionStorage in the page. */
  storage: KeyValueStorage;
  clock: Clock;
  /** Asks the shop's backend for the checkout session of cartId, taking the money as captureMethod says: the same cart gets the same session. */
  createSession(cartId: string, captureMethod: CaptureMethod): Promise<SessionAnswer>;
  /** The charger of a checkout session: createCharger in the page, with the fault switch's fetch. */
  charger(session: CheckoutSession, onEvent: (e: ChargerEvent) => void): Charger;
  /** The demo's own requests (slow.ts, unsafe.ts), through the same fetch, told to the timeline. */
  endpoint(publishableKey: string): Endpoint;
  observer?: ChargerObserver;
  mintKey?: () => string;
  mintCartId?: () => string;
  patienceMs?: number;
}

/** What the page's address says when it is the return from the bank. */
export interface BankReturn {
  /** chargeonce_key: the attempt's key. */
  key: string;
  /** The cart the return names (cart.ts returnCartParam), for when this tab's storage lost it; null: none named. */
  cartId: string | null;
  /** The capture method of that cart's session, as the return says (cart.ts returnCaptureParam). */
  captureMethod: CaptureMethod;
}

/** Where the page keeps the key of the attempt Authenticate took to the bank, for the page that comes back (or reloads). */
export const bankStorageKey = 'chargeonce-demo:bank';

/** The key of the charger's attempt; none while idle. */
const keyOf = (s: ChargerState): string | undefined => (s.kind === 'idle' ? undefined : s.attempt.key);

export class Checkout {
  private readonly cart: CartStore;
  private readonly listeners = new Set<Listener>();
  private readonly slow: SlowWatch;
  private current: CheckoutState = idleState();
  private charger: { c: Charger; session: CheckoutSession; off: () => void } | null = null;
  /** The page's own step, shown instead of the charger's state while there is one. */
  private step: PageStep | null = null;
  /** Unsafe mode's state, in the library's words: shown instead of the charger's. */
  private naiveState: ChargerState | null = null;
  /** The shopper pressed Authenticate: the page is on its way to the bank. */
  private leaving = false;
  /** When the charger asks chargeStatus next, by the page's clock (the countdown's end). */
  private nextCheckAt = 0;
  /** Bumped when the page's own work stops mattering. */
  private run = 0;
  private tick: unknown = null;
  /** Pay was handed to the charger, which has not left idle yet. */
  private handoff = false;
  /** The return from the bank this page is, if it is one; told (observer.returned) at its first request. */
  private back: { key: string; told: boolean } | null = null;
  /** The capture method the shopper chose for the cart's session, until the session fixes it. */
  private method: CaptureMethod = 'AUTOMATIC';

  constructor(private readonly o: CheckoutOptions) {
    this.cart = new CartStore(o.storage, o.mintCartId);
    this.slow = new SlowWatch((key) => this.askStatus(key), o.clock, () => this.update(), o.patienceMs);
  }

  get state(): CheckoutState {
    return this.current;
  }

  /** How the cart's session takes the money, once the shop gave one; null before: the shopper still chooses. */
  get captureMethod(): CaptureMethod | null {
    return this.cart.captureMethod();
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Starts the page: the cart's charger picks up an attempt this tab left,
   * by its key. On the return from the bank (back), resume() also finds
   * the key in the address; when this tab's storage lost the cart, the
   * shop's backend gives the cart the return names its session again. The
   * promise resolves once resume() has been called, and so has read the
   * address: the page may tidy it then.
   */
  start(back?: BankReturn): Promise<void> {
    if (back) this.back = { key: back.key, told: false };
    const stored = this.cart.session(this.o.clock.now());
    if (stored || !back?.cartId) {
      if (stored) this.resume(stored);
      this.update();
      return Promise.resolve();
    }
    // Storage lost the cart: the return names it, and the shop's backend keys its session on it.
    const cartId = back.cartId;
    this.cart.adopt(cartId);
    const run = this.restart({ kind: 'resuming' });
    return this.o
      .createSession(cartId, back.captureMethod)
      .catch((err: unknown): SessionAnswer => ({ error: { code: null, message: err instanceof Error ? err.message : String(err) } }))
      .then((answer) => {
        if (run !== this.run) return;
        if (!('session' in answer)) {
          this.restart({ kind: 'noSession', ...answer.error });
          return;
        }
        // PAID too: the attempt that paid it is the one to show.
        this.cart.keep(answer.session);
        this.resume(answer.session);
        this.update();
      });
  }

  /**
   * Authenticate: hands the page to charger.handleNextAction(), which
   * navigates to the bank's page (the attempt is in storage already).
   * False when there is no question of the bank's to answer.
   */
  authenticate(): boolean {
    const c = this.charger?.c;
    const shown = shownOf(this.current);
    if (shown.kind !== 'action' || !c) return false;
    this.o.storage.setItem(bankStorageKey, shown.c.attempt.key);
    try {
      c.handleNextAction();
    } catch {
      this.o.storage.removeItem(bankStorageKey);
      return false; // no longer asking: the state says what it is
    }
    this.leaving = true;
    this.update();
    return true;
  }

  /** The page is shown again from the back/forward cache: it did not leave after all. */
  shown(): void {
    if (!this.leaving) return;
    this.leaving = false;
    this.update();
  }

  /**
   * Pays with the card: a new attempt (a new key) on the cart's checkout
   * session, or the open attempt again with its own key and input. In
   * unsafe mode a new attempt goes to the naive sender. captureMethod is
   * the shopper's choice for a cart that has no session yet; a session's
   * own is fixed. Ignored while the page waits (a double click) and when
   * there is nothing to pay.
   */
  pay(paymentMethod: string, unsafe = false, captureMethod: CaptureMethod = 'AUTOMATIC'): void {
    if (!canPay(this.current)) return;
    this.method = captureMethod;
    const n = this.naiveState;
    if (n?.kind === 'unknown' && n.attempt.input) {
      this.naive(n.attempt.input, n.attempt.key); // unsafe mode's attempt: its first key again
      return;
    }
    const c = this.charger?.c;
    if (c?.state.kind === 'unknown') {
      this.naiveState = null;
      const { input } = c.state.attempt;
      // The same key; the state says how it ends. A key taken from the return's address has no input: it is only asked about.
      (input ? c.pay({ paymentMethod: input.paymentMethod }) : c.resume()).catch(() => {});
      return;
    }
    if (c?.state.kind === 'rejected') c.reset();
    const session = this.cart.session(this.o.clock.now());
    if (session) {
      this.begin(session, paymentMethod, unsafe);
      return;
    }
    const run = this.restart({ kind: 'starting' });
    void this.openSession().then((answer) => {
      if (run !== this.run) return;
      if (!('session' in answer)) {
        this.restart({ kind: 'noSession', ...answer.error });
        return;
      }
      if (answer.session.status !== 'OPEN') {
        const { status } = answer.session;
        this.restart({ kind: 'noSession', message: `The shop's checkout session is ${status}.`, code: `CHECKOUT_SESSION_${status}` });
        return;
      }
      this.cart.keep(answer.session);
      this.begin(answer.session, paymentMethod, unsafe);
    });
  }

  /**
   * After a final outcome, or a session that ended: the next payment gets a
   * new key, on the same session after a decline, on a new cart otherwise.
   * Refused (false) while the outcome is unknown.
   */
  startNew(): boolean {
    const s = this.current;
    const shown = shownOf(s);
    if (shown.kind !== 'final' && !sessionEnded(s)) return false;
    const newCart = sessionEnded(s) || (shown.kind === 'final' && shown.c.outcome.status === 'SUCCEEDED');
    const c = this.charger?.c;
    if (c && (c.state.kind === 'settled' || c.state.kind === 'rejected')) c.reset();
    this.o.storage.removeItem(bankStorageKey);
    this.back = null;
    if (newCart) {
      this.dropCharger();
      this.cart.renew();
    }
    this.restart(null);
    return true;
  }

  /** Stops every timer and ignores every answer still on its way. */
  dispose(): void {
    this.restart(null);
    this.dropCharger();
    this.listeners.clear();
  }

  // ---- the charger -----------------------------------------------------------

  /** resume() on the session's charger, with the page showing that it picks the attempt up. */
  private resume(session: CheckoutSession): void {
    const c = this.chargerFor(session);
    this.step = { kind: 'resuming' };
    const done = () => {
      if (this.step?.kind === 'resuming') this.step = null;
      this.update();
    };
    c.resume().then(done, done);
  }

  private begin(session: CheckoutSession, paymentMethod: string, unsafe: boolean): void {
    if (unsafe) {
      this.naive({ paymentMethod, checkoutSession: session.clientSecret });
      return;
    }
    const c = this.chargerFor(session);
    // Paying from the click on: the charger leaves idle once it has its lock.
    this.restart({ kind: 'starting' });
    this.handoff = true;
    c.pay({ paymentMethod }).catch(() => {
      // Its state says how it ended; a refusal before any state (another tab's attempt) ends the wait here.
      if (!this.handoff) return;
      this.handoff = false;
      this.step = null;
      this.update();
    });
  }

  private chargerFor(session: CheckoutSession): Charger {
    if (this.charger?.session.clientSecret === session.clientSecret) return this.charger.c;
    this.dropCharger();
    const c = this.o.charger(session, (e) => this.heard(e));
    let prev = c.state;
    const off = c.subscribe((s) => {
      const was = prev;
      prev = s;
      this.changed(s, was);
    });
    this.charger = { c, session, off };
    this.leaving = false;
    this.nextCheckAt = 0;
    return c;
  }

  private dropCharger(): void {
    const ch = this.charger;
    this.charger = null;
    if (!ch) return;
    ch.off();
    ch.c.close();
    this.slow.stop();
  }

  private heard(e: ChargerEvent): void {
    const back = this.back;
    if (back && !back.told && e.type === 'send' && e.key === back.key) {
      back.told = true;
      // Whence the charger took the key: its record (with the input), or the address alone.
      const st = this.charger?.c.state;
      const from: ReturnSource = st && st.kind !== 'idle' && st.attempt.input ? 'storage' : 'address';
      this.o.observer?.returned?.(e.key, from);
    }
    if (e.type === 'send' && e.operation === 'chargeCard') this.slow.opened(e.key);
    if (e.type === 'answer' && e.operation === 'chargeCard') this.slow.stop();
    this.o.observer?.event(e);
  }

  private changed(s: ChargerState, prev: ChargerState): void {
    if (this.handoff && s.kind !== 'idle') {
      this.handoff = false;
      this.step = null;
    }
    if (keyOf(s) !== keyOf(prev)) {
      this.leaving = false;
      this.nextCheckAt = 0;
    }
    if (s.kind !== 'sending') {
      this.slow.stop();
      // The attempt is picked up: what it is now is the news, not the resume.
      if (s.kind !== 'idle' && this.step?.kind === 'resuming') this.step = null;
    }
    this.countFrom(s);
    this.o.observer?.state(s, prev);
    this.update();
  }

  /** A poll's wait starts the countdown to the next chargeStatus, by the page's clock. */
  private countFrom(s: ChargerState): void {
    if (s.kind === 'following' && !s.attempt.nextAction && s.retryInMs !== null && s.retryInMs > 0) this.nextCheckAt = this.o.clock.now() + s.retryInMs;
  }

  /** chargeStatus about the open chargeCard: a read, on the attempt's session. */
  private askStatus(key: string) {
    const ch = this.charger!;
    const st = ch.c.state;
    const checkoutSession = (st.kind === 'idle' ? st.waiting : st.attempt.input)?.checkoutSession ?? ch.session.clientSecret;
    return send(this.o.endpoint(ch.session.publishableKey), 'chargeStatus', { idempotencyKey: key, checkoutSession });
  }

  // ---- the page's own work -----------------------------------------------------

  /** The cart's checkout session. A cart whose session was paid or expired meanwhile is done: a new cart asks once more. */
  private async openSession(): Promise<SessionAnswer> {
    const ask = () =>
      this.o
        .createSession(this.cart.id(), this.method)
        .catch((err: unknown): SessionAnswer => ({ error: { code: null, message: err instanceof Error ? err.message : String(err) } }));
    const answer = await ask();
    if (!('session' in answer) || answer.session.status === 'OPEN') return answer;
    this.cart.renew();
    return ask();
  }

  /** Unsafe mode: the naive sender, beside the charger. */
  private naive(input: ChargeCardInput, key?: string): void {
    const run = this.restart(this.step, this.naiveState);
    const clock = this.o.clock;
    const publishableKey = this.cart.publishableKey() ?? '';
    const told = (state: ChargerState | null) => {
      if (run !== this.run || !state) return;
      this.step = null;
      this.naiveState = state;
      this.countFrom(state);
      this.update();
    };
    void payNaively(
      input,
      {
        endpoint: this.o.endpoint(publishableKey),
        newSession: async () => {
          // A new order on the same terms: the capture method of the cart it takes the place of.
          const answer = await this.o.createSession((this.o.mintCartId ?? mintCartId)(), this.cart.captureMethod() ?? this.method).catch(() => null);
          return answer && 'session' in answer ? answer.session.clientSecret : null;
        },
        mintKey: this.o.mintKey ?? (() => crypto.randomUUID()),
        wait: (ms) => new Promise((resolve) => clock.setTimeout(resolve, ms)),
        now: () => clock.now(),
        maxTries: demoRetry.maxAttempts,
        live: () => run === this.run,
      },
      told,
      key,
    ).then(told);
  }

  /** Drops the page's own work in flight and shows step (or the charger's state); returns the new run. */
  private restart(step: PageStep | null, naive: ChargerState | null = null): number {
    this.run++;
    this.handoff = false;
    this.step = step;
    this.naiveState = naive;
    this.update();
    return this.run;
  }

  // ---- drawing -------------------------------------------------------------------

  private update(): void {
    const now = this.o.clock.now();
    const next: CheckoutState = {
      charger: this.naiveState ?? this.charger?.c.state ?? idleState().charger,
      page: {
        step: this.step,
        backKey: this.back?.key ?? this.o.storage.getItem(bankStorageKey),
        leaving: this.leaving,
        slow: this.slow.processing,
        remainingMs: Math.max(0, this.nextCheckAt - now),
      },
    };
    const prev = this.current;
    this.current = next;
    this.countdown();
    for (const fn of [...this.listeners]) fn(next, prev);
  }

  /** Redraws when the countdown's second changes: while the charger polls, before it asks. */
  private countdown(): void {
    if (this.tick !== null) this.o.clock.clearTimeout(this.tick);
    this.tick = null;
    const shown = shownOf(this.current);
    const ms = this.current.page.remainingMs;
    if (shown.kind !== 'processing' || shown.c.kind !== 'following' || shown.c.live !== 'poll' || shown.c.retryInMs === 0 || ms <= 0) return;
    this.tick = this.o.clock.setTimeout(() => {
      this.tick = null;
      this.update();
    }, ms % 1000 || 1000);
  }
}
