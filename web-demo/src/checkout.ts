// The checkout as a state machine: which state the page is in, what moves it
// on, and when it asks the server again. Rendering only draws a state
// (render.ts); the network, the clock and the storage are injected, so the
// unit tests drive every transition with fakes.
//
//   idle ──pay──▶ paying ──SUCCEEDED/FAILED──▶ final ──startNew──▶ idle
//                  │  ▲ │    (first the cart's checkout session, from the
//                  │  │ │     shop's backend; none ──▶ noSession ──pay──▶ paying)
//                  │  │ └──PROCESSING──▶ processing ──countdown──▶ chargeStatus
//                  │  │                   (its answer: final, processing again, …)
//                  │  └── a request lost or refused busy: the client retries (retry.ts)
//                  ├── every try failed (network, busy server) ──▶ unknown ──pay──▶ paying (same key)
//                  └── an error that is an answer ──▶ refused ──pay──▶ paying (same key)
//                       (the session ended: PAID, EXPIRED, LOCKED ──startNew──▶ idle, a new cart)
//   (reload) ──▶ resuming ──chargeStatus──▶ final | processing | notReached | unknown | refused
//
// While a chargeCard request is on the wire for longer than patienceMs (the
// slow card), the page asks chargeStatus with the same key, at the pace the
// server asks for, and shows PROCESSING when the server says so. chargeStatus
// is a read: it never charges, and it does not compete with the request that
// is doing the work. Whichever answer is final first settles the attempt.
//
// Live status: when the transport can subscribe (chargeUpdated over a
// websocket), a PROCESSING attempt is followed by the subscription instead
// of the countdown: the server sends its state at once and the final one as
// soon as it is committed, whichever instance finalizes it. While subscribed,
// the page still asks chargeStatus now and then (liveRecheckMs), since a
// connection can die without a word. A subscription that does not answer
// within liveConnectMs, fails or ends without a final state falls back to
// the countdown and chargeStatus, for the rest of the attempt.
//
// A checkout session fixes what is paid (cart.ts): the first attempt of a
// cart asks the shop's backend for it, and every attempt of the cart pays it
// with its own key. After a decline the next attempt pays the same session;
// after a success, the next purchase is a new cart with a new session.
import { CombinedError } from '@urql/core';
import { AttemptStore, type Attempt, type KeyValueStorage } from './attempt';
import { CartStore, type SessionAnswer } from './cart';
import type { ChargeCardInput, ChargeResultFragment } from './generated/graphql';
import { isRetryable, isRetryableCode, pollDelayMs } from './retry';
import type { RequestRecord } from './transport';

/** What a request ended with, after the client's retries. */
export interface Answer {
  payload?: ChargeResultFragment | null;
  error?: CombinedError;
}

/** The network, as the checkout needs it. The GraphQL client in main.ts, a fake in tests. */
export interface CheckoutTransport {
  /**
   * Asks the shop's backend for the checkout session of the cart cartId:
   * the same cart gets the same session back.
   */
  createSession(cartId: string): Promise<SessionAnswer>;
  /**
   * Sends chargeCard, retried by the client's policy (retry.ts) with the same
   * key, and resolves with the last answer. signal aborts it when the page
   * no longer needs the answer.
   */
  chargeCard(key: string, input: ChargeCardInput, signal: AbortSignal): Promise<Answer>;
  /** Asks chargeStatus for key (on the session it was sent with): a read, which never charges. */
  chargeStatus(key: string): Promise<Answer>;
  /**
   * Subscribes to the live status of key (chargeUpdated) and returns what
   * ends the subscription. Without it, the page polls chargeStatus.
   */
  watch?(key: string, handlers: LiveHandlers): () => void;
}

/** What a live status subscription tells the checkout. */
export interface LiveHandlers {
  /** A state of the attempt: the current one at once, then each change until a final one. */
  next(payload: ChargeResultFragment): void;
  /** It could not start, it failed, or it ended without a final state. Called once, and nothing after it. */
  failed(reason: string): void;
}

/**
 * How a PROCESSING attempt is followed: connecting to its live status,
 * subscribed to it, or polled because live status is unavailable. Absent:
 * polled, with no live status to try.
 */
export type LiveState = 'connecting' | 'subscribed' | 'unavailable';

/** Time, as the checkout needs it: window's in the page, a fake in tests. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Why the client is sending chargeCard again. */
export type RetryNote = { kind: 'lost' } | { kind: 'busy'; code: string; retryAfterMs: number | null };

export type Phase =
  /** No attempt yet. Pay starts one. */
  | { kind: 'idle' }
  /** After a reload: asking chargeStatus about the stored attempt. */
  | { kind: 'resuming' }
  /** chargeCard is on its way. retry says why it is being sent again, if it is. */
  | { kind: 'paying'; retry: RetryNote | null }
  /**
   * The server said PROCESSING; the page asks chargeStatus when the countdown
   * ends. charging: the chargeCard request is still open too (a slow bank).
   */
  | {
      kind: 'processing';
      /** The key that the server answered PROCESSING for (in unsafe mode, maybe not the attempt's). */
      key: string;
      /** chargeStatus questions asked so far, for the back-off (pollDelayMs). */
      checks: number;
      retryAfterMs: number | null;
      /** When the next question goes out (clock time). */
      nextCheckAt: number;
      /** Until then: the countdown, updated every second. */
      remainingMs: number;
      /** The question is on its way. */
      checking: boolean;
      charging: boolean;
      /** Followed by its live status, or polled (see LiveState). */
      live?: LiveState;
    }
  /** Every try failed without an answer (network, busy server): the outcome is unknown; Pay sends the same key. */
  | { kind: 'unknown'; code: string | null }
  /** An error that is an answer (the same request gets it again). */
  | { kind: 'refused'; message: string; code: string | null }
  /** chargeStatus knows no such key: the attempt never reached the server. Pay sends it. */
  | { kind: 'notReached' }
  /** The shop's backend gave no checkout session (code null: no answer). Nothing was charged; Pay asks again. */
  | { kind: 'noSession'; message: string; code: string | null }
  /** SUCCEEDED or FAILED. */
  | { kind: 'final'; payload: ChargeResultFragment };

export interface CheckoutState {
  /** The current attempt: open while its outcome is unknown, then SUCCEEDED or FAILED. */
  attempt: Attempt | null;
  phase: Phase;
}

export type Listener = (next: CheckoutState, prev: CheckoutState) => void;

export interface CheckoutOptions {
  transport: CheckoutTransport;
  clock: Clock;
  /** Where the attempt (its key) and the cart survive a reload: sessionStorage in the page. */
  storage: KeyValueStorage;
  mintKey?: () => string;
  mintCartId?: () => string;
  /** How long a chargeCard request may be open before the page asks chargeStatus. */
  patienceMs?: number;
  /** How long a live status subscription may take to answer before the page polls instead. */
  liveConnectMs?: number;
  /** While subscribed, how often the page asks chargeStatus anyway. */
  liveRecheckMs?: number;
}

/** A normal card answers well within this; a slower one gets asked about. */
export const patienceMsDefault = 1_000;
/** The server answers a subscription with the current state at once: a few seconds is plenty. */
export const liveConnectMsDefault = 3_000;
/** As seldom as the polling backs off to (pollPolicy.maxDelayMs). */
export const liveRecheckMsDefault = 15_000;

/**
 * The refusals after which the checkout session can no longer be paid, by
 * this key or any other: nothing was charged, and the shop must start a new
 * cart, with a new session.
 */
export const sessionEndedCodes: ReadonlySet<string> = new Set([
  'CHECKOUT_SESSION_PAID',
  'CHECKOUT_SESSION_EXPIRED',
  'CHECKOUT_SESSION_LOCKED',
]);

/** Whether chargeonce refused the attempt because its checkout session ended. */
export function sessionEnded(s: CheckoutState): boolean {
  return s.phase.kind === 'refused' && s.phase.code !== null && sessionEndedCodes.has(s.phase.code);
}

/** Whether Pay may be pressed in this state. */
export function canPay(s: CheckoutState): boolean {
  const k = s.phase.kind;
  return (
    (k === 'idle' || k === 'unknown' || k === 'refused' || k === 'notReached' || k === 'noSession') &&
    !sessionEnded(s) &&
    (s.attempt === null || s.attempt.state === 'open')
  );
}

/** Whether the page is waiting for the server (Pay is busy). */
export function isBusy(s: CheckoutState): boolean {
  const k = s.phase.kind;
  return k === 'paying' || k === 'processing' || k === 'resuming';
}

/**
 * Whether a result arrived with this transition: the page was waiting and
 * now has something to say (a final status, or why it has none). The page
 * moves the focus to the outcome then.
 */
export function resultArrived(prev: CheckoutState, next: CheckoutState): boolean {
  const settled = ['final', 'unknown', 'refused', 'notReached', 'noSession'];
  return isBusy(prev) && settled.includes(next.phase.kind);
}

/** Why the client sends a chargeCard again after the answer r, or null when it does not. */
export function retryNote(r: RequestRecord): RetryNote | null {
  if (r.outcome === 'network-error') return { kind: 'lost' };
  if (r.outcome === 'graphql-error' && isRetryableCode(r.detail)) {
    return { kind: 'busy', code: r.detail!, retryAfterMs: r.retryAfterMs ?? null };
  }
  return null;
}

export class Checkout {
  private readonly transport: CheckoutTransport;
  private readonly clock: Clock;
  private readonly store: AttemptStore;
  private readonly cart: CartStore;
  private readonly patienceMs: number;
  private readonly liveConnectMs: number;
  private readonly liveRecheckMs: number;
  private readonly listeners = new Set<Listener>();
  private current: CheckoutState = { attempt: null, phase: { kind: 'idle' } };
  /** Bumped whenever pending work stops mattering: a new payment, a new attempt, dispose. */
  private flow = 0;
  /** The flow's chargeCard call has not resolved yet. */
  private charging = false;
  /** The key of the chargeCard request on the wire, if one is. */
  private wireKey: string | null = null;
  /** A chargeStatus question is on its way. */
  private asking = false;
  /** Bumped when the answer to the question on its way stops mattering. */
  private question = 0;
  /** The one timer: the countdown, or the patience with a slow request. */
  private timer: unknown = null;
  private abort: AbortController | null = null;
  /** The key the live status subscription follows, what ends it, and how far it got. */
  private liveKey: string | null = null;
  private liveStop: (() => void) | null = null;
  private liveState: LiveState | undefined;
  /** Live status failed in this flow: poll for the rest of it. */
  private liveDown = false;

  constructor(opts: CheckoutOptions) {
    this.transport = opts.transport;
    this.clock = opts.clock;
    this.patienceMs = opts.patienceMs ?? patienceMsDefault;
    this.liveConnectMs = opts.liveConnectMs ?? liveConnectMsDefault;
    this.liveRecheckMs = opts.liveRecheckMs ?? liveRecheckMsDefault;
    this.store = new AttemptStore(opts.storage, opts.mintKey, () => new Date(opts.clock.now()));
    this.cart = new CartStore(opts.storage, opts.mintCartId);
  }

  get state(): CheckoutState {
    return this.current;
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Starts the page: idle, or, with an attempt stored by an earlier page in
   * this tab, resuming it by its key.
   */
  start(): void {
    const attempt = this.store.current();
    if (!attempt) {
      this.set({ attempt: null, phase: { kind: 'idle' } });
      return;
    }
    const flow = this.newFlow();
    this.set({ attempt, phase: { kind: 'resuming' } });
    void this.transport.chargeStatus(attempt.key).then(
      (answer) => this.resumed(flow, attempt, answer),
      (err: unknown) => this.resumed(flow, attempt, { error: networkError(err) }),
    );
  }

  /**
   * Pays: starts an attempt with a new key for input (the card), on the
   * cart's checkout session, or sends the open attempt again with its own
   * key and input. Ignored while the page waits for an answer (a double
   * click) and once the attempt is final. A cart without a session asks the
   * shop's backend for it first.
   */
  pay(input: ChargeCardInput): void {
    if (!canPay(this.current)) return;
    const open = this.store.current();
    if (open?.state === 'open') {
      this.charge(open);
      return;
    }
    const session = this.cart.session(this.clock.now());
    if (session) {
      this.charge(this.store.begin({ ...input, checkoutSession: session.clientSecret }));
      return;
    }
    const flow = this.newFlow();
    this.set({ attempt: null, phase: { kind: 'paying', retry: null } });
    void this.openSession().then((answer) => this.sessionOpened(flow, input, answer));
  }

  /**
   * Puts a final attempt away, so that the next payment gets a new key: on
   * the same checkout session after a decline, on a new cart after a
   * success. An attempt refused because its session ended is put away too,
   * with its cart. Refused (false) while the outcome is unknown.
   */
  startNew(): boolean {
    const s = this.current;
    if (s.phase.kind === 'final') {
      if (!this.store.startNew()) return false;
      if (s.phase.payload.status === 'SUCCEEDED') this.cart.renew();
    } else if (sessionEnded(s)) {
      if (s.attempt) this.store.discard(s.attempt.key);
      this.cart.renew();
    } else {
      return false;
    }
    this.newFlow(); // a chargeCard still open for the old attempt is dropped
    this.set({ attempt: null, phase: { kind: 'idle' } });
    return true;
  }

  /**
   * Takes note of a request the client sent or got an answer to (the
   * transport's record, see transport.ts): a chargeCard request open too
   * long gets asked about, and one that failed is being retried.
   */
  observe(r: RequestRecord): void {
    if (r.operation !== 'ChargeCard' || !this.charging) return;
    const phase = this.current.phase;
    if (phase.kind !== 'paying' && phase.kind !== 'processing') return;
    if (r.outcome === 'pending') {
      this.wireKey = r.idempotencyKey;
      if (phase.kind === 'paying') this.waitPatiently();
      return;
    }
    this.wireKey = null;
    const retry = retryNote(r);
    if (retry) {
      // The client sends it again: whatever the countdown said, the page is paying again.
      this.clearTimer();
      this.set({ ...this.current, phase: { kind: 'paying', retry } });
    } else if (phase.kind === 'paying') {
      this.clearTimer();
    }
  }

  /** Stops every timer and ignores every answer still on its way. */
  dispose(): void {
    this.newFlow();
    this.listeners.clear();
  }

  // ---- transitions ---------------------------------------------------------

  /** Sends chargeCard for attempt, with its key and input. */
  private charge(attempt: Attempt): void {
    const flow = this.newFlow();
    this.charging = true;
    this.set({ attempt, phase: { kind: 'paying', retry: null } });
    this.abort = new AbortController();
    void this.transport.chargeCard(attempt.key, attempt.input, this.abort.signal).then(
      (answer) => this.charged(flow, attempt, answer),
      (err: unknown) => this.charged(flow, attempt, { error: networkError(err) }),
    );
  }

  /**
   * The cart's checkout session from the shop's backend. A cart whose
   * session was paid or expired meanwhile is done: a new cart asks once more.
   */
  private async openSession(): Promise<SessionAnswer> {
    const ask = () =>
      this.transport
        .createSession(this.cart.id())
        .catch((err: unknown): SessionAnswer => ({ error: { code: null, message: err instanceof Error ? err.message : String(err) } }));
    const answer = await ask();
    if (!('session' in answer) || answer.session.status === 'OPEN') return answer;
    this.cart.renew();
    return ask();
  }

  private sessionOpened(flow: number, input: ChargeCardInput, answer: SessionAnswer): void {
    if (flow !== this.flow) return;
    if (!('session' in answer)) {
      this.set({ attempt: null, phase: { kind: 'noSession', ...answer.error } });
      return;
    }
    if (answer.session.status !== 'OPEN') {
      // A new cart's session was paid or expired already: nothing to pay it with.
      const { status } = answer.session;
      const message = `The shop's checkout session is ${status}.`;
      this.set({ attempt: null, phase: { kind: 'noSession', message, code: `CHECKOUT_SESSION_${status}` } });
      return;
    }
    this.cart.keep(answer.session);
    this.charge(this.store.begin({ ...input, checkoutSession: answer.session.clientSecret }));
  }

  private resumed(flow: number, attempt: Attempt, answer: Answer): void {
    if (flow !== this.flow) return;
    if (attempt.state !== 'open' && !answer.error && !answer.payload) {
      // A finished attempt whose stored result the server has forgotten.
      this.store.startNew();
      this.set({ attempt: null, phase: { kind: 'idle' } });
      return;
    }
    this.settle(attempt, answer, 0);
  }

  /** The chargeCard call resolved: the client has no retry left, or got an answer. */
  private charged(flow: number, attempt: Attempt, answer: Answer): void {
    if (flow !== this.flow) return;
    this.charging = false;
    this.wireKey = null;
    this.forgetQuestion(); // chargeCard's answer decides
    const k = this.current.phase.kind;
    if (k !== 'paying' && k !== 'processing') return; // a chargeStatus answer settled it first
    this.clearTimer();
    this.settle(attempt, answer, 0);
  }

  /** Moves to what answer says: final, PROCESSING (the countdown), or why there is no outcome. */
  private settle(attempt: Attempt, answer: Answer, checks: number): void {
    if (answer.error || answer.payload?.status !== 'PROCESSING') this.stopLive();
    if (answer.error) {
      const first = answer.error.graphQLErrors[0];
      const code = typeof first?.extensions?.code === 'string' ? first.extensions.code : null;
      this.set({
        ...this.current,
        phase: isRetryable(answer.error)
          ? { kind: 'unknown', code }
          : { kind: 'refused', message: first?.message ?? answer.error.message, code },
      });
      return;
    }
    const p = answer.payload;
    if (!p) {
      this.set({ ...this.current, phase: { kind: 'notReached' } });
      return;
    }
    if (p.status === 'PROCESSING') {
      this.countdown(p.idempotencyKey, p.retryAfterMs ?? null, checks);
      return;
    }
    this.store.settle(attempt.key, p.status);
    this.set({ attempt: this.store.current() ?? { ...attempt, state: p.status }, phase: { kind: 'final', payload: p } });
  }

  /** PROCESSING: follow the live status, or count down to the next chargeStatus question, one second at a time. */
  private countdown(key: string, retryAfterMs: number | null, checks: number): void {
    this.clearTimer();
    if (this.transport.watch && !this.liveDown) {
      this.follow(key, retryAfterMs, checks);
      return;
    }
    const wait = pollDelayMs(retryAfterMs, checks);
    this.waiting(key, retryAfterMs, checks, wait, this.liveDown ? 'unavailable' : undefined);
    this.tick();
  }

  /** Enters the PROCESSING phase that waits wait ms before the next check, with the live status it follows, if any. */
  private waiting(key: string, retryAfterMs: number | null, checks: number, wait: number, live: LiveState | undefined): void {
    this.set({
      ...this.current,
      phase: {
        kind: 'processing',
        key,
        checks,
        retryAfterMs,
        nextCheckAt: this.clock.now() + wait,
        remainingMs: wait,
        checking: false,
        charging: this.charging,
        ...(live ? { live } : {}),
      },
    });
  }

  /**
   * PROCESSING, with live status: subscribes to key (or keeps the
   * subscription it has), and waits for it: liveConnectMs for its first
   * answer, then liveRecheckMs before asking chargeStatus anyway.
   */
  private follow(key: string, retryAfterMs: number | null, checks: number): void {
    if (this.liveKey !== key) this.subscribeLive(key);
    const live = this.liveState ?? 'connecting';
    const wait = live === 'connecting' ? this.liveConnectMs : this.liveRecheckMs;
    this.waiting(key, retryAfterMs, checks, wait, live);
    this.timer = this.clock.setTimeout(() => {
      this.timer = null;
      if (this.liveState === 'connecting') this.liveFailed('no answer in time');
      else this.ask(key, checks, retryAfterMs);
    }, wait);
  }

  private subscribeLive(key: string): void {
    this.stopLive();
    const flow = this.flow;
    this.liveKey = key;
    this.liveState = 'connecting';
    const mine = () => flow === this.flow && this.liveKey === key;
    const stop = this.transport.watch!(key, {
      next: (p) => {
        if (mine()) this.liveNext(p);
      },
      failed: (reason) => {
        if (mine()) this.liveFailed(reason);
      },
    });
    if (mine()) this.liveStop = stop;
    else stop(); // it failed at once, and was put away already
  }

  /** A state from the live status: subscribed while PROCESSING; a final one settles the attempt. */
  private liveNext(p: ChargeResultFragment): void {
    const phase = this.current.phase;
    if (phase.kind !== 'paying' && phase.kind !== 'processing') return;
    if (p.status === 'PROCESSING') {
      if (this.liveState === 'subscribed') return;
      this.liveState = 'subscribed';
      // From now on the timer is the occasional recheck.
      if (phase.kind === 'processing') {
        this.clearTimer();
        this.follow(phase.key, phase.retryAfterMs, phase.checks);
      }
      return;
    }
    this.clearTimer();
    this.forgetQuestion();
    this.settle(this.current.attempt!, { payload: p }, phase.kind === 'processing' ? phase.checks + 1 : 0);
  }

  /** Live status is unavailable: poll instead, for the rest of this flow. */
  private liveFailed(_reason: string): void {
    this.stopLive();
    this.liveDown = true;
    const phase = this.current.phase;
    if (phase.kind === 'processing' && !phase.checking) this.countdown(phase.key, phase.retryAfterMs, phase.checks);
  }

  private stopLive(): void {
    const stop = this.liveStop;
    this.liveStop = null;
    this.liveKey = null;
    this.liveState = undefined;
    stop?.();
  }

  private tick(): void {
    const phase = this.current.phase;
    if (phase.kind !== 'processing') return;
    const remainingMs = Math.max(0, phase.nextCheckAt - this.clock.now());
    if (remainingMs === 0) {
      this.ask(phase.key, phase.checks, phase.retryAfterMs);
      return;
    }
    if (remainingMs !== phase.remainingMs) this.set({ ...this.current, phase: { ...phase, remainingMs } });
    // Wake up when the displayed second changes, or when the wait is over.
    const step = remainingMs % 1000 || 1000;
    this.timer = this.clock.setTimeout(() => {
      this.timer = null;
      this.tick();
    }, step);
  }

  /** A chargeCard request is on the wire: if it is still open after patienceMs, ask about it. */
  private waitPatiently(): void {
    if (this.asking) return; // the answer to the question on its way decides
    this.clearTimer();
    this.timer = this.clock.setTimeout(() => {
      this.timer = null;
      if (this.wireKey !== null && this.current.phase.kind === 'paying') this.ask(this.wireKey, 0, null);
    }, this.patienceMs);
  }

  /** Asks chargeStatus about key, and moves on with its answer. */
  private ask(key: string, checks: number, retryAfterMs: number | null): void {
    const question = ++this.question;
    const phase = this.current.phase;
    if (phase.kind === 'processing') this.set({ ...this.current, phase: { ...phase, checking: true, remainingMs: 0 } });
    this.asking = true;
    const done = (answer: Answer) => {
      if (question !== this.question) return;
      this.asking = false;
      this.answered(key, checks, retryAfterMs, answer);
    };
    void this.transport.chargeStatus(key).then(done, (err: unknown) => done({ error: networkError(err) }));
  }

  private answered(key: string, checks: number, retryAfterMs: number | null, answer: Answer): void {
    const phase = this.current.phase;
    if (phase.kind !== 'paying' && phase.kind !== 'processing') return; // settled meanwhile
    const attempt = this.current.attempt!;
    const p = answer.payload;
    if (this.charging) {
      // The question is about an open chargeCard request: only a status
      // moves the page; no answer, or an unknown key (not claimed yet),
      // leaves it waiting for the request, and asking again.
      if (p && p.status !== 'PROCESSING') {
        this.clearTimer();
        this.settle(attempt, answer, checks + 1);
      } else if (p) {
        this.countdown(p.idempotencyKey, p.retryAfterMs ?? null, checks + 1);
      } else if (phase.kind === 'processing') {
        this.countdown(key, retryAfterMs, checks + 1);
      } else if (this.wireKey !== null) {
        this.waitPatiently();
      }
      return;
    }
    if (answer.error && isRetryable(answer.error)) {
      this.countdown(key, retryAfterMs, checks + 1); // no answer, or a busy server: keep asking
      return;
    }
    this.settle(attempt, answer, checks + 1);
  }

  // ---- plumbing ------------------------------------------------------------

  private newFlow(): number {
    this.clearTimer();
    this.stopLive();
    this.liveDown = false;
    this.abort?.abort();
    this.abort = null;
    this.charging = false;
    this.wireKey = null;
    this.forgetQuestion();
    return ++this.flow;
  }

  private forgetQuestion(): void {
    this.question++;
    this.asking = false;
  }

  private clearTimer(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  private set(next: CheckoutState): void {
    const prev = this.current;
    this.current = next;
    for (const fn of [...this.listeners]) fn(next, prev);
  }
}

function networkError(err: unknown): CombinedError {
  return new CombinedError({ networkError: err instanceof Error ? err : new Error(String(err)) });
}
