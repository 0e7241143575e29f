// One act of the shop's backend on the charge the page paid (a refund, a
// capture, a void), asked for by the page and made by the backend with
// the merchant's secret key, on the server: the page never holds that key.
//
// The act keeps the client's half of the guarantee, and the library keeps
// it: each is an operation of the library's runner (createRunner), whose
// record holds the act's id (its key) in sessionStorage before the first
// byte; every retry, and the page after a reload, sends that id again; a
// lost answer or a busy backend is retried with jitter, PROCESSING is
// followed by sending the same id again (the backend answers it from
// chargeonce's replay), and an outcome the tries did not find is reported
// unknown. The desk only says what the page shows of it: its phase, from
// the runner's events and how the run ended.
//
//   none ──act──▶ sending ──▶ succeeded | failed | refused
//   sending ──no answer, or a busy backend──▶ retrying (the same id) ──▶ sending … ──▶ unknown
//   sending ──PROCESSING──▶ processing ──▶ sending (the same id)
//   unknown ──act──▶ sending (the same id); settled, when the charge allows another ──act──▶ sending (a new id)
//   (reload) ──▶ an open act is sent again with its own id; a settled one is shown
import {
  createRunner,
  OperationRejectedError,
  OperationUnknownError,
  type KeyStore,
  type Operation,
  type OperationFailure,
  type OperationOutcome,
  type OperationPayload,
  type RetryOptions,
  type Runner,
  type RunnerEvent,
  type ServerError,
} from '@chargeonce/client';
import { postAct, type BackendAct } from './backend';
import type { Clock } from './slow';

/** What the backend answers for an act: the API's payload, with what the act made beside it. */
export type ActPayload = OperationPayload & Record<string, unknown>;

/** The charge an act is about, and what it is worth. */
export interface ActTarget {
  chargeId: string;
  amount: number;
  currency: string;
}

export type ActPhase<M> =
  /** Nothing asked yet: pressing the button mints an id. */
  | { kind: 'none' }
  /** The request is on its way; try counts from 1 since the last answer. */
  | { kind: 'sending'; id: string; try: number }
  /** The last try had no answer (lost) or a busy backend's (busy): the same id goes again after waitMs. */
  | { kind: 'retrying'; id: string; cause: 'lost' | 'busy'; code: string | null; waitMs: number }
  /** The backend said PROCESSING: the same id goes again after retryAfterMs. */
  | { kind: 'processing'; id: string; retryAfterMs: number }
  /** made: what the act made. lost: an answer of this act was lost on the way, and a retry found it. */
  | { kind: 'succeeded'; id: string; made: M; replayed: boolean; lost: boolean }
  /** The provider refused it: nothing happened. */
  | { kind: 'failed'; id: string; failure: OperationFailure }
  /** An answer that refuses, and ran nothing, with what remains when the refusal says. */
  | { kind: 'refused'; id: string; code: string; message: string; refundable?: number; capturable?: number }
  /** Every try went without an answer: the act may or may not have been made; pressing again sends the same id. */
  | { kind: 'unknown'; id: string; code: string | null; tries: number };

/** The phases that end an act's id: the next act, if any, gets a new one. */
export type SettledAct<M> = Extract<ActPhase<M>, { kind: 'succeeded' | 'failed' | 'refused' }>;

export interface ActState<M, G extends ActTarget = ActTarget> {
  target: G | null;
  phase: ActPhase<M>;
}

/** Where the page keeps the records of the shop's acts (sessionStorage), under their names: refund:<charge id>, capture:…, void:…. */
export const actsStoragePrefix = 'chargeonce-demo:';

/** Tries in all after a lost or busy answer, the first included, and their backoff (full jitter: up to baseMs, then twice as long). */
export const actRetry = { maxAttempts: 3, baseMs: 500, capMs: 2_000 } as const;

/** The phases in which a request of the act is out, or about to go. */
export const actBusy = (p: ActPhase<unknown>) => p.kind === 'sending' || p.kind === 'retrying' || p.kind === 'processing';

/** Whether this transition ended the act's requests: its outcome arrived, or every try went unanswered. */
export const actSettled = (prev: ActPhase<unknown>, next: ActPhase<unknown>) => actBusy(prev) && !actBusy(next);

/**
 * Whether the act may be asked for in s: a first one, the unknown one
 * again (its own id), or, after one that settled, another when again
 * says that the charge allows it.
 */
export function canAct<M>(s: ActState<M, ActTarget>, again: (p: SettledAct<M>) => boolean): boolean {
  const p = s.phase;
  if (!s.target) return false;
  if (p.kind === 'none' || p.kind === 'unknown') return true;
  return (p.kind === 'succeeded' || p.kind === 'failed' || p.kind === 'refused') && again(p);
}

/**
 * The act as an operation of the runner: sent to the backend's route with
 * the record's key as the act's id; made reads what a SUCCEEDED answer
 * made (null: no answer of the act's, which the runner tries again).
 */
export function actOperation<M extends object>(act: BackendAct, made: (p: ActPayload) => M | null, base: typeof fetch = fetch): Operation<{ chargeId: string }, ActPayload, M> {
  return {
    name: act.field,
    send: (key, input) => postAct<ActPayload>(act.path, { [act.idField]: key, chargeId: input.chargeId }, base),
    made,
  };
}

export type ActListener<M, G extends ActTarget> = (next: ActState<M, G>, prev: ActState<M, G>) => void;

export interface DeskOptions<M extends object> {
  /** Where the acts' records live: storageKeyStore(sessionStorage, …) in the page. */
  store: KeyStore;
  /** The record's name for a charge's act, before the charge's id: refund, capture, void. */
  name: string;
  op: Operation<{ chargeId: string }, ActPayload, M>;
  /** Whether, after a settled act, the charge allows another (under a new id). */
  again(p: SettledAct<M>): boolean;
  /** Hears the runner's events of the act the desk shows: the timeline's rows. */
  onEvent?(e: RunnerEvent): void;
  clock: Clock;
  retry?: RetryOptions;
  /** Mints an act's id when its button is pressed: crypto.randomUUID() by default. */
  mintId?: () => string;
  /** The backoff's jitter, for tests. */
  random?: () => number;
}

/** The act on the page's charge: the runner's run of it, under one name per charge, and the phase the page shows. */
export class Desk<M extends object, G extends ActTarget = ActTarget> {
  private readonly runner: Runner;
  private current: ActState<M, G> = { target: null, phase: { kind: 'none' } };
  private readonly listeners = new Set<ActListener<M, G>>();
  /** Bumped when the charge shown changes: the runs of another one go on, unseen. */
  private shown = 0;
  /** The id the next new record gets: minted when the button is pressed, so that the page shows it at once. */
  private minted = '';
  /** What the runner told of the run shown: its last send's try, its last answer's code, whether an answer was lost. */
  private heard = { tries: 0, code: null as string | null, lost: false };

  constructor(private readonly o: DeskOptions<M>) {
    this.runner = createRunner({
      store: o.store,
      retry: o.retry ?? actRetry,
      clock: { now: () => o.clock.now(), sleep: (ms) => new Promise((resolve) => o.clock.setTimeout(resolve, ms)) },
      onEvent: (e) => this.told(e),
      mintKey: () => this.minted,
      ...(o.random ? { random: o.random } : {}),
    });
  }

  get state(): ActState<M, G> {
    return this.current;
  }

  subscribe(fn: ActListener<M, G>): () => void {
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
   * (the page was reloaded in the middle). The same charge again only takes
   * its newer terms (what it is worth now).
   */
  show(target: G | null): void {
    const t = this.current.target;
    if (t && target && t.chargeId === target.chargeId) {
      if (JSON.stringify(t) !== JSON.stringify(target)) this.set({ ...this.current, target });
      return;
    }
    if (!t && !target) return;
    const shown = ++this.shown;
    this.set({ target, phase: { kind: 'none' } });
    if (target) void this.pickUp(target, shown);
  }

  /**
   * Asks for the act: under a new id, or under the unknown one's again.
   * False when there is nothing to do (a double click, or the charge
   * allows no more).
   */
  act(): boolean {
    const s = this.current;
    if (!s.target || !this.possible) return false;
    const p = s.phase;
    const id = p.kind === 'unknown' ? p.id : (this.o.mintId ?? (() => crypto.randomUUID()))();
    void this.go(s.target, this.shown, id, p.kind !== 'none' && p.kind !== 'unknown');
    return true;
  }

  private nameOf(t: ActTarget): string {
    return `${this.o.name}:${t.chargeId}`;
  }

  /** What the store holds for the charge's act: shown, or run again when it is open. */
  private async pickUp(target: G, shown: number): Promise<void> {
    const rec = await this.runner.record(this.nameOf(target)).catch(() => null);
    if (shown !== this.shown || !rec) return;
    if (rec.status === 'open') return this.go(target, shown, rec.key, false);
    if (rec.status === 'settled' && rec.outcome) this.phase(settledPhase(rec.outcome as OperationOutcome<M>, false));
    if (rec.status === 'rejected' && rec.error) this.phase(refusedPhase(rec.key, rec.error));
  }

  /**
   * Runs the charge's act to its end under id (the open record's, or a new
   * one's, after forgetting the settled one), and shows how it ended.
   */
  private async go(target: G, shown: number, id: string, forget: boolean): Promise<void> {
    const name = this.nameOf(target);
    this.minted = id;
    this.heard = { tries: 0, code: null, lost: false };
    this.phase({ kind: 'sending', id, try: 1 });
    try {
      if (forget) await this.runner.forget(name);
      const outcome = await this.runner.run(this.o.op, name, { chargeId: target.chargeId });
      if (shown === this.shown) this.phase(settledPhase(outcome, this.heard.lost));
    } catch (err) {
      if (shown !== this.shown) return;
      if (err instanceof OperationRejectedError) this.phase(refusedPhase(err.key, { code: err.code, message: err.message, ...(err.extensions ? { extensions: err.extensions } : {}) }));
      // No answer within the tries (or a store that failed): the act may or may not have been made.
      else this.phase({ kind: 'unknown', id: err instanceof OperationUnknownError ? err.key : id, code: this.heard.code, tries: this.heard.tries });
    }
  }

  /** The runner's word on a run: the phase it shows, when it is the charge shown's; and the timeline's row. */
  private told(e: RunnerEvent): void {
    const t = this.current.target;
    if (!t || e.name !== this.nameOf(t)) return;
    this.o.onEvent?.(e);
    switch (e.type) {
      case 'send':
        this.heard.tries = e.try;
        this.phase({ kind: 'sending', id: e.key, try: e.try });
        break;
      case 'answer':
        this.heard.code = e.code ?? null;
        this.heard.lost ||= e.reason !== undefined;
        break;
      case 'retry': {
        const busy = e.cause !== 'network' && e.cause !== 'no payload';
        this.phase({ kind: 'retrying', id: e.key, cause: busy ? 'busy' : 'lost', code: busy ? e.cause : null, waitMs: e.waitMs });
        break;
      }
      case 'follow':
        this.phase({ kind: 'processing', id: e.key, retryAfterMs: e.waitMs });
    }
  }

  private phase(phase: ActPhase<M>): void {
    // The first send's event says what the press showed already: no news.
    if (JSON.stringify(phase) === JSON.stringify(this.current.phase)) return;
    this.set({ target: this.current.target, phase });
  }

  private set(next: ActState<M, G>): void {
    const prev = this.current;
    this.current = next;
    for (const fn of this.listeners) fn(next, prev);
  }
}

/** The phase of a run's outcome: what it made, or why it failed. */
function settledPhase<M extends object>(o: OperationOutcome<M>, lost: boolean): SettledAct<M> {
  if (o.status === 'FAILED') return { kind: 'failed', id: o.key, failure: o.failure };
  const { status: _s, key, replayed, ...made } = o;
  return { kind: 'succeeded', id: key, made: made as unknown as M, replayed, lost };
}

/** The phase of a refusal: its code and message, and what remains when it says. */
function refusedPhase(id: string, e: ServerError): SettledAct<never> {
  const x = e.extensions ?? {};
  return {
    kind: 'refused',
    id,
    code: e.code,
    message: e.message,
    ...(typeof x.refundable === 'number' ? { refundable: x.refundable } : {}),
    ...(typeof x.capturable === 'number' ? { capturable: x.capturable } : {}),
  };
}
