// The shop's refund of the charge the page just paid, through the shop's
// backend: the page never holds the secret key that refunds take. It asks
// the backend (in development, chargeonce serves a small one at
// /demo/refund), which calls refundCharge with the merchant's secret key,
// on the server, under the page's refund id.
//
// A refund is a payment backwards, with the same client's half of the
// guarantee as the checkout: one refund id per refund, minted when Refund
// is pressed and kept in sessionStorage beside the attempt before the
// first byte, then sent with every retry of that refund
// and again after a reload. The backend answers the same id with the stored
// refund (replayed), never a second one, so a lost answer is retried safely.
//
//   none ──Refund──▶ sending ──▶ succeeded | failed | refused
//   sending ──no answer, or a busy backend──▶ retrying (the same id, after a short backoff) ──▶ sending … ──▶ unknown
//   sending ──PROCESSING──▶ processing ──(retryAfterMs)──▶ sending (the same id)
//   unknown ──Refund──▶ sending (the same id); failed, or refused with some left ──Refund──▶ sending (a new id)
//   (reload) ──▶ an open refund is sent again with its own id
import type { KeyValueStorage } from '@chargeonce/client';
import { postToBackend, type BackendRefusal } from './backend';
import type { CheckoutState } from './checkout-state';
import { retryableCodes } from './request';
import type { Clock } from './slow';

export const refundPath = '/demo/refund';

export type RefundStatus = 'PROCESSING' | 'SUCCEEDED' | 'FAILED';

/** What the page asks the shop's backend for: the whole of what remains of the charge, under refundId. */
export interface RefundRequest {
  /** The page's idempotency key for this refund: 1..100 characters, the same on every retry. */
  refundId: string;
  /** chargeonce's Charge.id. */
  chargeId: string;
}

/** chargeonce's refund, as the backend answers it. */
export interface Refund {
  id: string;
  chargeId: string;
  amount: number;
  currency: string;
  providerRefundId: string | null;
  createdAt: string;
}

/** What the backend answers: refundCharge's payload. */
export interface RefundPayload {
  status: RefundStatus;
  replayed: boolean;
  refund?: Refund | null;
  failure?: { code: string; message: string } | null;
  retryAfterMs?: number | null;
}

/** The backend's answer, or why there is none: code is null when no answer arrived. */
export type RefundAnswer = { payload: RefundPayload } | { error: BackendRefusal };

/** Asks the shop's backend for the refund. It never throws. */
export async function requestRefund(req: RefundRequest, base: typeof fetch = fetch): Promise<RefundAnswer> {
  const answer = await postToBackend(refundPath, req, base);
  if (!answer.ok) return { error: answer.error };
  const p = answer.body as Partial<RefundPayload> | null;
  if (!p || !['PROCESSING', 'SUCCEEDED', 'FAILED'].includes(p.status as string) || (p.status === 'SUCCEEDED' && !p.refund)) {
    return { error: { code: null, message: `HTTP ${answer.status}: no refund in the answer` } };
  }
  return { payload: p as RefundPayload };
}

/** The charge the page may refund: the attempt that paid it, and what it charged. */
export interface RefundTarget {
  /** The checkout attempt's idempotency key: the refund is kept beside it. */
  attemptKey: string;
  chargeId: string;
  amount: number;
  currency: string;
}

/** The charge of a checkout that SUCCEEDED, or null while there is none to refund. */
export function refundTarget(s: CheckoutState): RefundTarget | null {
  if (s.phase.kind !== 'final') return null;
  const p = s.phase.payload;
  if (p.status !== 'SUCCEEDED' || !p.charge) return null;
  return { attemptKey: p.idempotencyKey, chargeId: p.charge.id, amount: p.charge.amount, currency: p.charge.currency };
}

export type RefundPhase =
  /** Nothing asked yet: Refund mints a refund id. */
  | { kind: 'none' }
  /** The request is on its way; try counts from 1 since the last answer. */
  | { kind: 'sending'; refundId: string; try: number }
  /** The last try had no answer (lost) or a busy backend's (busy): the same id goes again after waitMs. */
  | { kind: 'retrying'; refundId: string; cause: 'lost' | 'busy'; code: string | null; waitMs: number }
  /** The backend said PROCESSING: the same id goes again after retryAfterMs. */
  | { kind: 'processing'; refundId: string; retryAfterMs: number }
  /** lost: an answer of this refund was lost on the way, and a retry found it. */
  | { kind: 'succeeded'; refundId: string; refund: Refund; replayed: boolean; lost: boolean }
  /** The refund failed: nothing went back, and its amount is refundable again. */
  | { kind: 'failed'; refundId: string; failure: { code: string; message: string } }
  /** An answer that refuses, and ran nothing. refundable: what remains (REFUND_EXCEEDS_CHARGE). */
  | { kind: 'refused'; refundId: string; code: string | null; message: string; refundable: number | null }
  /** Every try went without an answer: the refund may or may not have been made; Refund sends the same id. */
  | { kind: 'unknown'; refundId: string; code: string | null; tries: number };

export interface RefundState {
  target: RefundTarget | null;
  phase: RefundPhase;
}

/** Tries in all after a lost or busy answer, the first included, and their backoff. */
export const refundRetry = { maxAttempts: 3, baseMs: 500, capMs: 2_000 } as const;

/** How long to wait before asking about a PROCESSING refund again: the server's hint, within bounds. */
export const pollMs = (retryAfterMs: number | null | undefined) => Math.min(10_000, Math.max(250, retryAfterMs ?? 1_000));

/** The phases in which a request of the refund is out, or about to go. */
export const refundBusy = (p: RefundPhase) => p.kind === 'sending' || p.kind === 'retrying' || p.kind === 'processing';

/** The phases that end a refund id: the next refund, if any, gets a new one. */
type Settled = Extract<RefundPhase, { kind: 'succeeded' | 'failed' | 'refused' }>;

/** Whether Refund may be pressed: a first refund, the unknown one again, or one more after a failure or with some left. */
export function canRefund(s: RefundState): boolean {
  const p = s.phase;
  if (!s.target) return false;
  return p.kind === 'none' || p.kind === 'unknown' || p.kind === 'failed' || (p.kind === 'refused' && p.refundable !== 0);
}

export const refundStorageKey = 'chargeonce-demo:refund';

interface StoredRefund {
  attemptKey: string;
  chargeId: string;
  refundId: string;
  /** How it ended, once it did; null while it is open. */
  settled: Settled | null;
}

export type RefundListener = (next: RefundState, prev: RefundState) => void;

export interface RefundDeskOptions {
  /** Where the refund id survives a reload: sessionStorage in the page. */
  storage: KeyValueStorage;
  clock: Clock;
  /** Asks the shop's backend: requestRefund through the recording fetch in the page. */
  send(req: RefundRequest): Promise<RefundAnswer>;
  mintId?: () => string;
  retry?: { maxAttempts: number; baseMs: number; capMs: number };
}

/**
 * The refund of the page's charge: one refund id per refund, kept in
 * storage, sent until the backend answers how it ended.
 */
export class RefundDesk {
  private current: RefundState = { target: null, phase: { kind: 'none' } };
  private readonly listeners = new Set<RefundListener>();
  /** Bumped when the running refund stops mattering (another charge, or none). */
  private run = 0;
  private timer: unknown = null;

  constructor(private readonly o: RefundDeskOptions) {}

  get state(): RefundState {
    return this.current;
  }

  subscribe(fn: RefundListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * The charge the page shows, or null. A refund this tab kept for it is
   * picked up: shown when it ended, sent again with its id when it did not
   * (the page was reloaded in the middle). A refund kept for another
   * attempt is forgotten: the page has moved on to another purchase.
   */
  show(target: RefundTarget | null): void {
    const t = this.current.target;
    if (t?.attemptKey === target?.attemptKey && t?.chargeId === target?.chargeId) return;
    this.stop();
    if (!target) {
      this.set({ target: null, phase: { kind: 'none' } });
      return;
    }
    const stored = this.load();
    if (stored && (stored.attemptKey !== target.attemptKey || stored.chargeId !== target.chargeId)) {
      this.o.storage.removeItem(refundStorageKey);
    }
    const mine = stored?.attemptKey === target.attemptKey && stored.chargeId === target.chargeId ? stored : null;
    if (mine?.settled) {
      this.set({ target, phase: mine.settled });
      return;
    }
    this.set({ target, phase: { kind: 'none' } });
    if (mine) void this.loop(mine.refundId, this.run);
  }

  /**
   * Refund: the whole of what remains of the charge, under a new refund id,
   * or under the unknown one's again. False when there is nothing to do
   * (a double click, or nothing left).
   */
  refund(): boolean {
    const s = this.current;
    if (!s.target || !canRefund(s)) return false;
    const refundId = s.phase.kind === 'unknown' ? s.phase.refundId : (this.o.mintId ?? (() => crypto.randomUUID()))();
    // Kept before the first byte: a reload sends the same id again.
    this.save({ attemptKey: s.target.attemptKey, chargeId: s.target.chargeId, refundId, settled: null });
    void this.loop(refundId, this.run);
    return true;
  }

  private async loop(refundId: string, run: number): Promise<void> {
    const target = this.current.target!;
    const retry = this.o.retry ?? refundRetry;
    let tries = 0;
    let lost = false;
    for (;;) {
      tries++;
      this.set({ target, phase: { kind: 'sending', refundId, try: tries } });
      const answer = await this.o.send({ refundId, chargeId: target.chargeId });
      if (run !== this.run) return;
      if ('error' in answer) {
        const { code, message, refundable } = answer.error;
        if (code !== null && !retryableCodes.has(code)) {
          this.settle({ kind: 'refused', refundId, code, message, refundable: refundable ?? null });
          return;
        }
        lost ||= code === null;
        if (tries >= retry.maxAttempts) {
          this.set({ target, phase: { kind: 'unknown', refundId, code, tries } });
          return;
        }
        const waitMs = Math.min(retry.capMs, retry.baseMs * 2 ** (tries - 1));
        this.set({ target, phase: { kind: 'retrying', refundId, cause: code === null ? 'lost' : 'busy', code, waitMs } });
        if (!(await this.sleep(waitMs, run))) return;
        continue;
      }
      tries = 0; // an answer: the backoff starts afresh
      const p = answer.payload;
      if (p.status === 'SUCCEEDED') {
        this.settle({ kind: 'succeeded', refundId, refund: p.refund!, replayed: p.replayed, lost });
        return;
      }
      if (p.status === 'FAILED') {
        this.settle({ kind: 'failed', refundId, failure: p.failure ?? { code: 'refund_failed', message: 'The refund failed.' } });
        return;
      }
      const wait = pollMs(p.retryAfterMs);
      this.set({ target, phase: { kind: 'processing', refundId, retryAfterMs: wait } });
      if (!(await this.sleep(wait, run))) return;
    }
  }

  /** Waits ms; false when the refund stopped mattering meanwhile. */
  private sleep(ms: number, run: number): Promise<boolean> {
    return new Promise((resolve) => {
      this.timer = this.o.clock.setTimeout(() => {
        this.timer = null;
        resolve(run === this.run);
      }, ms);
    });
  }

  private stop(): void {
    this.run++;
    if (this.timer !== null) this.o.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  private settle(phase: Settled): void {
    const target = this.current.target!;
    this.save({ attemptKey: target.attemptKey, chargeId: target.chargeId, refundId: phase.refundId, settled: phase });
    this.set({ target, phase });
  }

  private set(next: RefundState): void {
    const prev = this.current;
    this.current = next;
    for (const fn of this.listeners) fn(next, prev);
  }

  private load(): StoredRefund | null {
    const raw = this.o.storage.getItem(refundStorageKey);
    if (!raw) return null;
    try {
      const r = JSON.parse(raw) as StoredRefund;
      return typeof r.refundId === 'string' && r.refundId && typeof r.attemptKey === 'string' ? r : null;
    } catch {
      return null; // unreadable: no refund was kept
    }
  }

  private save(r: StoredRefund): void {
    this.o.storage.setItem(refundStorageKey, JSON.stringify(r));
  }
}
