// What the checkout shows: the page's Phase and attempt, made from the
// charger's state and what the page adds of its own (Decor: the resume, the
// retry's cause, the live status, the countdown, the slow question, the way
// to the bank and back), and the rules the view and the checkout both ask
// (canPay, isBusy, sessionEnded).
// Pure: checkout.ts feeds it, view.ts and render.ts draw it.
import type { ChargeCardInput, ChargePayload, ChargerEvent, ChargerState } from '@chargeonce/client';

/** The attempt the page shows: its key, what it charges, and how far it got. */
export interface Attempt {
  key: string;
  /** null: a key taken from the return's address (chargeonce_key) after storage lost the attempt; its input was never known here. */
  input: ChargeCardInput | null;
  /** open while its outcome is unknown; rejected: refused without running, nothing charged. */
  state: 'open' | 'SUCCEEDED' | 'FAILED' | 'rejected';
}

/** Why the same attempt is being sent again. */
export type RetryNote =
  | { kind: 'lost' }
  /** waitMs: the charger's wait before the next try (the server's hint, when it gave one). */
  | { kind: 'busy'; code: string; waitMs: number | null };

/**
 * How a PROCESSING attempt is followed: connecting to its live status,
 * subscribed to it, or polled because live status is unavailable. Absent:
 * polled, with no live status to try.
 */
export type LiveState = 'connecting' | 'subscribed' | 'unavailable';

export type Phase =
  /** No attempt yet. Pay starts one. */
  | { kind: 'idle' }
  /** After a reload: the charger picks the stored attempt up by its key. back: the page is the return from the bank. */
  | { kind: 'resuming'; back?: true }
  /** chargeCard is on its way (or the cart's session). retry says why it is being sent again, if it is. */
  | { kind: 'paying'; retry: RetryNote | null }
  /** Offline, or a hidden tab that was waiting: nothing is sent, nothing fails. */
  | { kind: 'paused'; by: 'offline' | 'hidden' }
  /** The server said PROCESSING. charging: the chargeCard request is still open too (a slow bank). */
  | {
      kind: 'processing';
      key: string;
      /** chargeStatus questions asked so far. */
      checks: number;
      retryAfterMs: number | null;
      /** When the next question goes out (clock time). */
      nextCheckAt: number;
      /** Until then: the countdown, updated every second. */
      remainingMs: number;
      /** The question is on its way. */
      checking: boolean;
      charging: boolean;
      live?: LiveState;
    }
  /**
   * The server said PROCESSING with a nextAction: the bank asks the shopper
   * to authenticate (3-D Secure) on its page at url, before expiresAt. The
   * attempt waits under its key and is never sent again: whatever follows
   * only reads how it ended.
   */
  | {
      kind: 'action';
      key: string;
      url: string;
      expiresAt: string;
      /** The shopper pressed Authenticate: the page is on its way to the bank. */
      leaving: boolean;
      /** The shopper has been to the bank with this key (this page is the return, or a reload of it), and its word has not arrived yet. */
      back: boolean;
      live?: LiveState;
    }
  /** Every try failed without an answer (network, busy server): the outcome is unknown; Pay sends the same key. */
  | { kind: 'unknown'; code: string | null }
  /** An error that is an answer: nothing was run. */
  | { kind: 'refused'; message: string; code: string | null }
  /** The shop's backend gave no checkout session (code null: no answer). Nothing was charged; Pay asks again. */
  | { kind: 'noSession'; message: string; code: string | null }
  /** SUCCEEDED or FAILED. */
  | { kind: 'final'; payload: ChargePayload };

export interface CheckoutState {
  attempt: Attempt | null;
  phase: Phase;
}

export type Listener = (next: CheckoutState, prev: CheckoutState) => void;

/**
 * Where the return from the bank found the attempt: in this tab's storage
 * (the charger's record, with its input), or only in the address
 * (chargeonce_key), when storage lost it.
 */
export type ReturnSource = 'storage' | 'address';

/** What else hears the charger: the timeline's live status rows (liverow.ts), and its steps back from the bank. */
export interface ChargerObserver {
  event(e: ChargerEvent): void;
  state(next: ChargerState, prev: ChargerState): void;
  /** The return from the bank took key up (from), right before its first request. */
  returned?(key: string, from: ReturnSource): void;
}


/** Tries in all, the first included: the demo gives up early to show the unknown outcome. */
export const demoRetry = { maxAttempts: 4, capMs: 4_000 } as const;

/** The refusals after which the checkout session can no longer be paid: a new cart is needed. */
export const sessionEndedCodes: ReadonlySet<string> = new Set(['CHECKOUT_SESSION_PAID', 'CHECKOUT_SESSION_EXPIRED', 'CHECKOUT_SESSION_LOCKED']);

export function sessionEnded(s: CheckoutState): boolean {
  return s.phase.kind === 'refused' && s.phase.code !== null && sessionEndedCodes.has(s.phase.code);
}

/** Whether Pay may be pressed in this state. */
export function canPay(s: CheckoutState): boolean {
  const k = s.phase.kind;
  return (k === 'idle' || k === 'unknown' || k === 'refused' || k === 'noSession') && !sessionEnded(s);
}

/** Whether the page is waiting for the server (Pay is busy). */
export function isBusy(s: CheckoutState): boolean {
  const k = s.phase.kind;
  return k === 'paying' || k === 'processing' || k === 'resuming' || k === 'paused';
}

/**
 * Whether a result arrived with this transition, or the bank's question
 * (action): the page moves the focus to the outcome then. The bank's answer
 * after action is a result too.
 */
export function resultArrived(prev: CheckoutState, next: CheckoutState): boolean {
  const k = next.phase.kind;
  if (k === prev.phase.kind) return false;
  return (isBusy(prev) || prev.phase.kind === 'action') && ['final', 'unknown', 'refused', 'noSession', 'action'].includes(k);
}

/** What the page shows for the charger's state s. */
export function viewOf(s: ChargerState, d: Decor, now: number): CheckoutState {
  const attempt: Attempt | null =
    s.kind === 'idle'
      ? null
      : { key: s.attempt.key, input: s.attempt.input, state: s.kind === 'settled' ? s.outcome.status : s.kind === 'rejected' ? 'rejected' : 'open' };
  return { attempt, phase: phaseOf(s, d, now) };
}

/** What the page adds to the charger's state: what its events said, and its own question. */
export interface Decor {
  resuming: boolean;
  /** The cause of the last retry of this attempt. */
  retry: RetryNote | null;
  /** Live status failed for this attempt: it is polled. */
  liveDown: boolean;
  /** When the charger asks chargeStatus next (clock time). */
  nextCheckAt: number;
  /** What chargeStatus said about the open chargeCard (slow.ts). */
  slow: { checks: number; retryAfterMs: number | null } | null;
  /** The shopper pressed Authenticate: handleNextAction() is taking the page to the bank. */
  leaving: boolean;
  /**
   * The key of the attempt the shopper went to the bank with: this page's
   * chargeonce_key (the return), or the one Authenticate took there before
   * this page loaded (a reload of the return, a back button).
   */
  backKey: string | null;
}

function phaseOf(s: ChargerState, d: Decor, now: number): Phase {
  // Paused is the charger's flag beside a waiting kind; the page shows it as a phase of its own.
  if (s.paused) return { kind: 'paused', by: s.flags.hidden && !s.flags.offline && !s.flags.follower ? 'hidden' : 'offline' };
  switch (s.kind) {
    case 'idle':
      if (d.resuming) return resuming(d);
      // A pay() waiting for another tab's attempt, whose key this tab has not heard yet.
      return s.waiting ? { kind: 'paying', retry: null } : { kind: 'idle' };
    case 'sending':
      if (d.slow) {
        const { checks, retryAfterMs } = d.slow;
        return { kind: 'processing', key: s.attempt.key, checks, retryAfterMs, nextCheckAt: now, remainingMs: 0, checking: false, charging: true };
      }
      if (d.resuming) return resuming(d);
      return { kind: 'paying', retry: s.attempt.sends > 1 ? d.retry : null };
    case 'retrying':
      return { kind: 'paying', retry: d.retry };
    case 'following': {
      const live: LiveState | undefined =
        s.live === 'poll' ? (d.liveDown ? 'unavailable' : undefined) : s.liveOpen ? 'subscribed' : 'connecting';
      const { key, nextAction } = s.attempt;
      if (nextAction) {
        const { url, expiresAt } = nextAction;
        return { kind: 'action', key, url, expiresAt, leaving: d.leaving, back: d.backKey === key, ...(live ? { live } : {}) };
      }
      return {
        kind: 'processing',
        key,
        checks: s.checks,
        retryAfterMs: s.pollMs,
        nextCheckAt: d.nextCheckAt,
        remainingMs: Math.max(0, d.nextCheckAt - now),
        checking: s.retryInMs === 0,
        charging: false,
        ...(live ? { live } : {}),
      };
    }
    case 'unknown':
      return { kind: 'unknown', code: s.error?.code ?? null };
    case 'settled': {
      const o = s.outcome;
      const payload: ChargePayload =
        o.status === 'SUCCEEDED'
          ? { idempotencyKey: o.key, status: o.status, replayed: o.replayed, charge: o.charge, failure: null }
          : { idempotencyKey: o.key, status: o.status, replayed: o.replayed, charge: null, failure: o.failure };
      return { kind: 'final', payload };
    }
    case 'rejected':
      return { kind: 'refused', message: s.error?.message ?? 'refused', code: s.error?.code ?? null };
  }
}

const resuming = (d: Decor): Phase => (d.backKey ? { kind: 'resuming', back: true } : { kind: 'resuming' });
