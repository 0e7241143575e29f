// One act of the shop's backend on the charge the page paid (a refund, a
// capture, a void), asked for by the page and made by the backend with
// the merchant's secret key, on the server: the page never holds that key.
//
// An act is a payment's kind of attempt, with the same client's half of the
// guarantee as the checkout: one id per act, minted when its button is
// pressed and kept in sessionStorage beside the attempt before the first
// byte, then sent with every retry of that act and again after a reload.
// The backend answers the same id with the stored result (replayed), never
// a second act, so a lost answer is retried safely.
//
//   none ──act──▶ sending ──▶ succeeded | failed | refused
//   sending ──no answer, or a busy backend──▶ retrying (the same id, after a short backoff) ──▶ sending … ──▶ unknown
//   sending ──PROCESSING──▶ processing ──(retryAfterMs)──▶ sending (the same id)
//   unknown ──act──▶ sending (the same id); settled, when the act allows another ──act──▶ sending (a new id)
//   (reload) ──▶ an open act is sent again with its own id
import type { KeyValueStorage } from '@chargeonce/client';
import { postToBackend, type BackendAct, type BackendAnswer, type BackendRefusal } from './backend';
import { retryableCodes } from '@chargeonce/client';
import type { Clock } from './slow';

export type ActStatus = 'PROCESSING' | 'SUCCEEDED' | 'FAILED';

export interface ActFailure {
  code: string;
  message: string;
}

/** What the backend answers for an act, read: what it made (made) once it SUCCEEDED. */
export type ActPayload<T> =
  | { status: 'SUCCEEDED'; replayed: boolean; made: T }
  | { status: 'FAILED'; replayed: boolean; failure: ActFailure }
  | { status: 'PROCESSING'; replayed: boolean; retryAfterMs: number | null };

/** The backend's answer, or why there is none: code is null when no answer arrived. */
export type ActAnswer<T> = { payload: ActPayload<T> } | { error: BackendRefusal };

/** The charge an act is about: the checkout attempt that paid it, and what it is worth. */
export interface ActTarget {
  /** The checkout attempt's idempotency key: the act is kept beside it. */
  attemptKey: string;
  chargeId: string;
  amount: number;
  currency: string;
}

export type ActPhase<T> =
  /** Nothing asked yet: pressing the button mints an id. */
  | { kind: 'none' }
  /** The request is on its way; try counts from 1 since the last answer. */
  | { kind: 'sending'; id: string; try: number }
  /** The last try had no answer (lost) or a busy backend's (busy): the same id goes again after waitMs. */
  | { kind: 'retrying'; id: string; cause: 'lost' | 'busy'; code: string | null; waitMs: number }
  /** The backend said PROCESSING: the same id goes again after retryAfterMs. */
  | { kind: 'processing'; id: string; retryAfterMs: number }
  /** lost: an answer of this act was lost on the way, and a retry found it. */
  | { kind: 'succeeded'; id: string; made: T; replayed: boolean; lost: boolean }
  /** The provider refused it: nothing happened. */
  | { kind: 'failed'; id: string; failure: ActFailure }
  /** An answer that refuses, and ran nothing (with what remains, when the refusal says). */
  | ({ kind: 'refused'; id: string } & BackendRefusal)
  /** Every try went without an answer: the act may or may not have been made; pressing again sends the same id. */
  | { kind: 'unknown'; id: string; code: string | null; tries: number };

/** The phases that end an act's id: the next act, if any, gets a new one. */
export type SettledAct<T> = Extract<ActPhase<T>, { kind: 'succeeded' | 'failed' | 'refused' }>;

export interface ActState<T, G extends ActTarget = ActTarget> {
  target: G | null;
  phase: ActPhase<T>;
}

/** Tries in all after a lost or busy answer, the first included, and their backoff. */
export const actRetry = { maxAttempts: 3, baseMs: 500, capMs: 2_000 } as const;

/** How long to wait before asking about a PROCESSING act again: the server's hint, within bounds. */
export const pollMs = (retryAfterMs: number | null | undefined) => Math.min(10_000, Math.max(250, retryAfterMs ?? 1_000));

/** The phases in which a request of the act is out, or about to go. */
export const actBusy = (p: ActPhase<unknown>) => p.kind === 'sending' || p.kind === 'retrying' || p.kind === 'processing';

/** Whether this transition ended the act's requests: its outcome arrived, or every try went unanswered. */
export const actSettled = (prev: ActPhase<unknown>, next: ActPhase<unknown>) => actBusy(prev) && !actBusy(next);

/**
 * Whether the act may be asked for in s: a first one, the unknown one
 * again (its own id), or, after one that settled, another when again
 * says that the charge allows it.
 */
export function canAct<T>(s: ActState<T, ActTarget>, again: (p: SettledAct<T>) => boolean): boolean {
  const p = s.phase;
  if (!s.target) return false;
  if (p.kind === 'none' || p.kind === 'unknown') return true;
  return (p.kind === 'succeeded' || p.kind === 'failed' || p.kind === 'refused') && again(p);
}

/**
 * POSTs the act under id for the target's charge, and reads the answer:
 * made reads what a SUCCEEDED answer made (null: no answer of the act's).
 * It never throws.
 */
export async function requestAct<T>(
  act: BackendAct,
  id: string,
  chargeId: string,
  made: (body: Record<string, unknown>) => T | null,
  base: typeof fetch = fetch,
): Promise<ActAnswer<T>> {
  return readAct(await postToBackend(act.path, { [act.idField]: id, chargeId }, base), made);
}

/** The act's payload in the backend's answer, or why there is none. */
export function readAct<T>(answer: BackendAnswer, made: (body: Record<string, unknown>) => T | null): ActAnswer<T> {
  if (!answer.ok) return { error: answer.error };
  const p = answer.body as Record<string, unknown> | null;
  const replayed = p?.replayed === true;
  const none = { error: { code: null, message: `HTTP ${answer.status}: no answer of the act in it` } };
  switch (p?.status) {
    case 'SUCCEEDED': {
      const m = made(p);
      return m === null ? none : { payload: { status: 'SUCCEEDED', replayed, made: m } };
    }
    case 'FAILED': {
      const f = p.failure as ActFailure | null | undefined;
      return { payload: { status: 'FAILED', replayed, failure: f ?? { code: 'failed', message: 'The provider refused it.' } } };
    }
    case 'PROCESSING':
      return { payload: { status: 'PROCESSING', replayed, retryAfterMs: typeof p.retryAfterMs === 'number' ? p.retryAfterMs : null } };
  }
  return none;
}

interface StoredAct<T> {
  attemptKey: string;
  chargeId: string;
  id: string;
  /** How it ended, once it did; null while it is open. */
  settled: SettledAct<T> | null;
}

export type ActListener<T, G extends ActTarget> = (next: ActState<T, G>, prev: ActState<T, G>) => void;

export interface DeskOptions<T, G extends ActTarget> {
  /** Where the act's id survives a reload: sessionStorage in the page, under storageKey. */
  storage: KeyValueStorage;
  storageKey: string;
  clock: Clock;
  /** Asks the shop's backend for the act under id: through the recording fetch in the page. */
  send(id: string, target: G): Promise<ActAnswer<T>>;
  /** Whether, after a settled act, the charge allows another (under a new id). */
  again(p: SettledAct<T>): boolean;
  mintId?: () => string;
  retry?: { maxAttempts: number; baseMs: number; capMs: number };
}

/**
 * The act on the page's charge: one id per act, kept in storage, sent
 * until the backend answers how it ended.
 */
export class Desk<T, G extends ActTarget = ActTarget> {
  private current: ActState<T, G> = { target: null, phase: { kind: 'none' } };
  private readonly listeners = new Set<ActListener<T, G>>();
  /** Bumped when the running act stops mattering (another charge, or none). */
  private run = 0;
  private timer: unknown = null;

  constructor(private readonly o: DeskOptions<T, G>) {}

  get state(): ActState<T, G> {
    return this.current;
  }

  subscribe(fn: ActListener<T, G>): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Whether the act may be asked for now. */
  get possible(): boolean {
    return canAct(this.current, this.o.again);
  }

  /**
   * The charge the page shows, or null. An act this tab kept for it is
   * picked up: shown when it ended, sent again with its id when it did not
   * (the page was reloaded in the middle). An act kept for another attempt
   * is forgotten: the page has moved on to another purchase. The same
   * charge again only takes its newer terms (what it is worth now).
   */
  show(target: G | null): void {
    const t = this.current.target;
    if (t && target && t.attemptKey === target.attemptKey && t.chargeId === target.chargeId) {
      if (JSON.stringify(t) !== JSON.stringify(target)) this.set({ ...this.current, target });
      return;
    }
    if (!t && !target) return;
    this.stop();
    if (!target) {
      this.set({ target: null, phase: { kind: 'none' } });
      return;
    }
    const stored = this.load();
    const mine = stored?.attemptKey === target.attemptKey && stored.chargeId === target.chargeId ? stored : null;
    if (stored && !mine) this.o.storage.removeItem(this.o.storageKey);
    if (mine?.settled) {
      this.set({ target, phase: mine.settled });
      return;
    }
    this.set({ target, phase: { kind: 'none' } });
    if (mine) void this.loop(mine.id, this.run);
  }

  /**
   * Asks for the act: under a new id, or under the unknown one's again.
   * False when there is nothing to do (a double click, or the charge
   * allows no more).
   */
  act(): boolean {
    const s = this.current;
    if (!s.target || !this.possible) return false;
    const id = s.phase.kind === 'unknown' ? s.phase.id : (this.o.mintId ?? (() => crypto.randomUUID()))();
    // Kept before the first byte: a reload sends the same id again.
    this.save({ attemptKey: s.target.attemptKey, chargeId: s.target.chargeId, id, settled: null });
    void this.loop(id, this.run);
    return true;
  }

  private async loop(id: string, run: number): Promise<void> {
    const retry = this.o.retry ?? actRetry;
    let tries = 0;
    let lost = false;
    for (;;) {
      tries++;
      this.phase({ kind: 'sending', id, try: tries });
      const answer = await this.o.send(id, this.current.target!);
      if (run !== this.run) return;
      if ('error' in answer) {
        const refusal = answer.error;
        if (refusal.code !== null && !retryableCodes.has(refusal.code)) {
          this.settle({ kind: 'refused', id, ...refusal });
          return;
        }
        lost ||= refusal.code === null;
        if (tries >= retry.maxAttempts) {
          this.phase({ kind: 'unknown', id, code: refusal.code, tries });
          return;
        }
        const waitMs = Math.min(retry.capMs, retry.baseMs * 2 ** (tries - 1));
        this.phase({ kind: 'retrying', id, cause: refusal.code === null ? 'lost' : 'busy', code: refusal.code, waitMs });
        if (!(await this.sleep(waitMs, run))) return;
        continue;
      }
      tries = 0; // an answer: the backoff starts afresh
      const p = answer.payload;
      if (p.status === 'SUCCEEDED') {
        this.settle({ kind: 'succeeded', id, made: p.made, replayed: p.replayed, lost });
        return;
      }
      if (p.status === 'FAILED') {
        this.settle({ kind: 'failed', id, failure: p.failure });
        return;
      }
      const wait = pollMs(p.retryAfterMs);
      this.phase({ kind: 'processing', id, retryAfterMs: wait });
      if (!(await this.sleep(wait, run))) return;
    }
  }

  /** Waits ms; false when the act stopped mattering meanwhile. */
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

  private settle(phase: SettledAct<T>): void {
    const target = this.current.target!;
    this.save({ attemptKey: target.attemptKey, chargeId: target.chargeId, id: phase.id, settled: phase });
    this.phase(phase);
  }

  private phase(phase: ActPhase<T>): void {
    this.set({ target: this.current.target, phase });
  }

  private set(next: ActState<T, G>): void {
    const prev = this.current;
    this.current = next;
    for (const fn of this.listeners) fn(next, prev);
  }

  private load(): StoredAct<T> | null {
    const raw = this.o.storage.getItem(this.o.storageKey);
    if (!raw) return null;
    try {
      const r = JSON.parse(raw) as StoredAct<T>;
      return typeof r.id === 'string' && r.id && typeof r.attemptKey === 'string' ? r : null;
    } catch {
      return null; // unreadable: no act was kept
    }
  }

  private save(r: StoredAct<T>): void {
    this.o.storage.setItem(this.o.storageKey, JSON.stringify(r));
  }
}
