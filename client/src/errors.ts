// The errors pay() and resume() reject with. Each carries the attempt's
// key, so a page can say which attempt it is about; a decline (FAILED) is
// an outcome, never one of these.

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
