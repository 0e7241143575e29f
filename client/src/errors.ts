// The errors pay() and resume() reject with. Each carries the attempt's
// key, so a page can say which attempt it is about; a decline (FAILED) is
// an outcome, never one of these.
import type { Result } from './machine-types.js';
import type { Outcome } from './types.js';

/** The server refused the request without running it (extensions.code). Nothing was charged under key. */
export class ChargeRejectedError extends Error {
  override readonly name = 'ChargeRejectedError';
  constructor(
    readonly key: string,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/**
 * No answer came within the retry budget, or the attempt's expiresAt
 * passed unanswered: it may or may not have charged. Safe to resume(),
 * which asks again with the same key; never pay under a new key.
 */
export class UnknownOutcomeError extends Error {
  override readonly name = 'UnknownOutcomeError';
  constructor(
    readonly key: string,
    readonly expiresAt?: string,
    message = `attempt ${key}: outcome unknown; resume() asks again`,
  ) {
    super(message);
  }
}

/** pay() with another input while an attempt of the scope is open (in this tab or another): key names it. */
export class AttemptOpenError extends Error {
  override readonly name = 'AttemptOpenError';
  constructor(readonly key: string) {
    super(`attempt ${key} is open: resume() follows it`);
  }
}

/** pay(input, { signal }) was aborted: the caller stopped waiting; the attempt goes on and stays resumable. */
export class AbortError extends Error {
  override readonly name = 'AbortError';
  constructor(readonly key?: string) {
    super(key ? `aborted waiting for ${key}: resume() follows it` : 'aborted');
  }
}

/** A call the charger's state does not allow, e.g. reset() while an attempt is open or unknown. */
export class ChargerStateError extends Error {
  override readonly name = 'ChargerStateError';
  constructor(
    readonly state: string,
    message: string,
  ) {
    super(message);
  }
}

/** The error class for how the machine says a call failed. */
export function errorOf(e: Extract<Result, { error: unknown }>['error']): Error {
  return e.type === 'rejected'
    ? new ChargeRejectedError(e.key, e.error.code, e.error.message, e.error.field)
    : e.type === 'unknown'
      ? new UnknownOutcomeError(e.key, e.expiresAt)
      : e.type === 'open'
        ? new AttemptOpenError(e.key)
        : new ChargerStateError(e.state, e.message);
}

/** A pay() or resume() caller waiting for its promise. */
export interface Waiter {
  resolve(v: Outcome | null): void;
  reject(e: Error): void;
}

/** Ends w's promise as the machine's result says: the outcome, or the error class for it. */
export function settle(w: Waiter, r: Result): void {
  if ('ok' in r) w.resolve(r.ok);
  else w.reject(errorOf(r.error));
}

/** p, or the error abort() makes once signal aborts (the caller stops waiting; the attempt goes on). */
export function abortable<T>(p: Promise<T>, signal: AbortSignal, abort: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abort());
    signal.addEventListener('abort', onAbort, { once: true });
    const done = () => signal.removeEventListener('abort', onAbort);
    p.then(
      (v) => (done(), resolve(v)),
      (err: unknown) => (done(), reject(err)),
    );
  });
}
