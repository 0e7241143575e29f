// What the checkout shows: the charger's state as the library gives it
// (ChargerState: its kind, the attempt, the retry's cause, the live
// channel, paused, the bank's nextAction), and beside it only what is the
// page's own: the shop's checkout session, the resume that has not
// answered, the way to the bank and back, the slow question's answer, and
// the countdown by the page's clock. shownOf says which of the page's
// displays that is; the rules the view and the checkout both ask (canPay,
// isBusy, sessionEnded) read it. Pure: checkout.ts feeds it, view.ts and
// render.ts draw it.
import type {
  Attempt,
  ChargerEvent,
  ChargerState,
  FollowingState,
  NextAction,
  RejectedState,
  RetryingState,
  SendingState,
  SettledState,
  UnknownState,
} from '@chargeonce/client';
import type { SlowNews } from './slow';

/** A step of the page's own, shown instead of the charger's state. */
export type PageStep =
  /** Pay was pressed: the shop's session for the cart is asked for, or the charger was handed the payment and has not left idle yet. */
  | { kind: 'starting' }
  /** The shop's backend gave no checkout session (code null: no answer). Nothing was charged; Pay asks again. */
  | { kind: 'noSession'; message: string; code: string | null }
  /** After a reload, or on the return from the bank: resume() has not answered yet. */
  | { kind: 'resuming' };

/** What the page adds to the charger's state. */
export interface PageState {
  step: PageStep | null;
  /**
   * The key of the attempt the shopper went to the bank with: this page's
   * chargeonce_key (the return), or the one Authenticate took there before
   * this page loaded (a reload of the return, a back button).
   */
  backKey: string | null;
  /** The shopper pressed Authenticate: handleNextAction() is taking the page to the bank. */
  leaving: boolean;
  /** What chargeStatus said about the open chargeCard (slow.ts), once it said PROCESSING. */
  slow: SlowNews | null;
  /** Until the charger's next chargeStatus, by the page's clock: the countdown. */
  remainingMs: number;
}

export interface CheckoutState {
  /** The charger's state; idle before the cart has a charger. In unsafe mode, the naive sender's, told in the library's words (unsafe.ts). */
  charger: ChargerState;
  page: PageState;
}

export const pageState = (over: Partial<PageState> = {}): PageState => ({ step: null, backKey: null, leaving: false, slow: null, remainingMs: 0, ...over });

/** No attempt, nothing of the page's own. */
export const idleState = (): CheckoutState => ({ charger: { kind: 'idle', flags: { offline: false, hidden: false, follower: false }, paused: false }, page: pageState() });

/** Which of its displays the page shows, with the charger's state it draws (never a copy of its fields). */
export type Shown =
  /** No attempt yet. Pay starts one. */
  | { kind: 'idle' }
  /** After a reload, the charger picks the stored attempt up by its key. back: the page is the return from the bank. */
  | { kind: 'resuming'; back: boolean }
  /** The shop's backend gave no checkout session. */
  | { kind: 'noSession'; message: string; code: string | null }
  /** chargeCard on its way (again after a retry: c.cause, c.retryInMs); null before the charger has one (the shop's session, another tab's lock). */
  | { kind: 'paying'; c: SendingState | RetryingState | null }
  /** Offline, or a hidden tab that was waiting: nothing is sent, nothing fails. */
  | { kind: 'paused'; c: RetryingState | FollowingState }
  /** The server said PROCESSING; a SendingState: its chargeCard is still open (a slow bank), and chargeStatus said so (page.slow). */
  | { kind: 'processing'; c: FollowingState | SendingState }
  /** PROCESSING with a nextAction: the bank asks the shopper to authenticate; the attempt waits under its key. */
  | { kind: 'action'; c: FollowingState; nextAction: NextAction }
  /** Every try failed without an answer (network, busy server): Pay sends the same key. */
  | { kind: 'unknown'; c: UnknownState }
  /** An error that is an answer: nothing was run. */
  | { kind: 'refused'; c: RejectedState }
  /** SUCCEEDED or FAILED. */
  | { kind: 'final'; c: SettledState };

export function shownOf(s: CheckoutState): Shown {
  const { charger: c, page } = s;
  if (page.step?.kind === 'starting') return { kind: 'paying', c: null };
  if (page.step?.kind === 'noSession') return { kind: 'noSession', message: page.step.message, code: page.step.code };
  // Paused is the charger's flag beside a waiting kind; the page shows it as a display of its own.
  if (c.paused && (c.kind === 'retrying' || c.kind === 'following')) return { kind: 'paused', c };
  const resuming = page.step?.kind === 'resuming' ? ({ kind: 'resuming', back: page.backKey !== null } as const) : null;
  switch (c.kind) {
    case 'idle':
      // A pay() waiting for another tab's attempt, whose key this tab has not heard yet.
      return resuming ?? (c.waiting ? { kind: 'paying', c: null } : { kind: 'idle' });
    case 'sending':
      if (page.slow) return { kind: 'processing', c };
      return resuming ?? { kind: 'paying', c };
    case 'retrying':
      return { kind: 'paying', c };
    case 'following':
      return c.attempt.nextAction ? { kind: 'action', c, nextAction: c.attempt.nextAction } : { kind: 'processing', c };
    case 'unknown':
      return { kind: 'unknown', c };
    case 'rejected':
      return { kind: 'refused', c };
    case 'settled':
      return { kind: 'final', c };
  }
}

/** The attempt the page shows, or null while there is none. */
export const attemptOf = (s: CheckoutState): Attempt | null => (s.charger.kind === 'idle' ? null : s.charger.attempt);

/** Whether the attempt's outcome is still open (unknown included): its card and key stay as they were. */
export const isOpen = (s: CheckoutState): boolean => ['sending', 'retrying', 'following', 'unknown'].includes(s.charger.kind);

/** The return from the bank for the attempt shown: its key is the one the shopper went to the bank with. */
export const isBack = (s: CheckoutState): boolean => s.page.backKey !== null && s.page.backKey === attemptOf(s)?.key;

/** The refusal's code, when the page shows one. */
const refusedCode = (sh: Shown): string | null => (sh.kind === 'refused' ? sh.c.error.code : null);

/** What else hears the charger: the timeline's live status rows (liverow.ts), and its steps back from the bank. */
export interface ChargerObserver {
  event(e: ChargerEvent): void;
  state(next: ChargerState, prev: ChargerState): void;
  /** The return from the bank took key up (from), right before its first request. */
  returned?(key: string, from: ReturnSource): void;
}

/**
 * Where the return from the bank found the attempt: in this tab's storage
 * (the charger's record, with its input), or only in the address
 * (chargeonce_key), when storage lost it.
 */
export type ReturnSource = 'storage' | 'address';

export type Listener = (next: CheckoutState, prev: CheckoutState) => void;

/** Tries in all, the first included: the demo gives up early to show the unknown outcome. */
export const demoRetry = { maxAttempts: 4, capMs: 4_000 } as const;

/** The refusals after which the checkout session can no longer be paid: a new cart is needed. */
export const sessionEndedCodes: ReadonlySet<string> = new Set(['CHECKOUT_SESSION_PAID', 'CHECKOUT_SESSION_EXPIRED', 'CHECKOUT_SESSION_LOCKED']);

export function sessionEnded(s: CheckoutState): boolean {
  const code = refusedCode(shownOf(s));
  return code !== null && sessionEndedCodes.has(code);
}

/** Whether Pay may be pressed in this state. */
export function canPay(s: CheckoutState): boolean {
  const k = shownOf(s).kind;
  return (k === 'idle' || k === 'unknown' || k === 'refused' || k === 'noSession') && !sessionEnded(s);
}

/** Whether the page is waiting for the server (Pay is busy). */
export function isBusy(s: CheckoutState): boolean {
  const k = shownOf(s).kind;
  return k === 'paying' || k === 'processing' || k === 'resuming' || k === 'paused';
}

/**
 * Whether a result arrived with this transition, or the bank's question
 * (action): the page moves the focus to the outcome then. The bank's answer
 * after action is a result too.
 */
export function resultArrived(prev: CheckoutState, next: CheckoutState): boolean {
  const k = shownOf(next).kind;
  const was = shownOf(prev).kind;
  if (k === was) return false;
  return (isBusy(prev) || was === 'action') && ['final', 'unknown', 'refused', 'noSession', 'action'].includes(k);
}
