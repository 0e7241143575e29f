// The retry policy of the demo's GraphQL client, and the polling policy for
// PROCESSING answers.
//
// A request is sent again, with the same idempotency key, when its outcome is
// unknown or when the server ran nothing and asked for another try:
//   - a network error: the request may or may not have reached the server,
//     and chargeonce answers a repeat with the stored result (replayed: true)
//     instead of charging again;
//   - SERVICE_UNAVAILABLE (503) and RATE_LIMITED (429): nothing was run, and
//     extensions.retryAfterMs says when to come back;
//   - INTERNAL_SERVER_ERROR: a retry with the same key is always safe.
// Any other GraphQL error is an answer (a bad input, a key reused with another
// input, an order already paid, a request too large), and sending the same
// request again would get the same answer.
//
// urql's fetchExchange parses a JSON body whatever the HTTP status, so a 503
// or 429 from chargeonce arrives as error.graphQLErrors, with no networkError
// (error.response is the HTTP response). The policy therefore goes by
// extensions.code. A non-JSON error page (a proxy's 502) is a network error.
import type { CombinedError, Exchange, Operation } from '@urql/core';
import { makeOperation, mapExchange } from '@urql/core';
import { retryExchange, type RetryExchangeOptions } from '@urql/exchange-retry';

export interface RetryPolicy {
  /** The first retry waits 1.5 to 2.5 times this (randomDelay), later ones grow. */
  initialDelayMs: number;
  /** The longest wait before a retry, the server's retryAfterMs included. */
  maxDelayMs: number;
  randomDelay: boolean;
  /** Attempts in all, the first one included, whatever the errors were. */
  maxNumberAttempts: number;
}

/** How the client retries a request. */
export const retryPolicy: Readonly<RetryPolicy> = {
  initialDelayMs: 400,
  maxDelayMs: 4_000,
  randomDelay: true,
  maxNumberAttempts: 4,
};

/** The GraphQL error codes after which the same request may be sent again. */
export const retryableCodes: ReadonlySet<string> = new Set([
  'SERVICE_UNAVAILABLE',
  'RATE_LIMITED',
  'REQUEST_TIMEOUT',
  'INTERNAL_SERVER_ERROR',
]);

export function isRetryableCode(code: unknown): boolean {
  return typeof code === 'string' && retryableCodes.has(code);
}

/** Whether a retry with the same key may help: see the top of this file. */
export function isRetryable(error: CombinedError | undefined | null): boolean {
  if (!error) return false;
  if (error.graphQLErrors.length === 0) return !!error.networkError;
  return error.graphQLErrors.every((e) => isRetryableCode(e.extensions?.code));
}

/** The longest extensions.retryAfterMs among the error's GraphQL errors, or 0. */
export function serverRetryAfterMs(error: CombinedError | undefined | null): number {
  let ms = 0;
  for (const e of error?.graphQLErrors ?? []) {
    const v = e.extensions?.retryAfterMs;
    if (typeof v === 'number' && Number.isFinite(v) && v > ms) ms = v;
  }
  return ms;
}

export interface RetryModeOptions {
  /**
   * Unsafe mode, the broken habit that the demo shows beside the right one:
   * every retry of chargeCard mints a new idempotency key, so chargeonce sees
   * a new attempt and charges again. Read at each retry.
   */
  unsafe: () => boolean;
  mintKey: () => string;
  /**
   * In unsafe mode, what a naive checkout does besides: it takes the retry
   * for a new order and asks the shop for a new checkout session (a new
   * cart), since a new key on the same session would be refused
   * (CHECKOUT_SESSION_PAID). Resolves with the new session's client secret,
   * or null when there is none (the retry then goes on the old session).
   */
  newSession?: () => Promise<string | null>;
}

/**
 * The operation context field that says when a retry may be sent (epoch ms),
 * set by retryWith from the server's retryAfterMs.
 */
const notBeforeField = 'retryNotBefore';
/** The operation context field that asks for a new checkout session first (unsafe mode). */
const newSessionField = 'retryNewSession';

/**
 * The retry exchanges, to put in front of fetchExchange. retryExchange waits
 * its own backoff, the same for every error, and its retryWith hook cannot
 * wait. So retryWith stamps the retried operation with the time the server
 * asked for, and retryAfterExchange, next in the chain, holds it until then:
 * a retry waits the longer of the backoff and retryAfterMs (capped at
 * maxDelayMs).
 */
export function retryExchanges(mode: RetryModeOptions, policy: Readonly<RetryPolicy> = retryPolicy): Exchange[] {
  return [retryExchange(retryOptions(mode, policy)), retryAfterExchange(mode.newSession)];
}

/** The options for retryExchange; they honour retryAfterMs only with retryAfterExchange after it. */
function retryOptions(
  { unsafe, mintKey }: RetryModeOptions,
  policy: Readonly<RetryPolicy> = retryPolicy,
): RetryExchangeOptions {
  return {
    ...policy,
    retryIf: (error) => isRetryable(error),
    retryWith: (error, operation) => {
      if (!isRetryable(error)) return null;
      const renew = unsafe() && carriesKey(operation);
      const op = renew ? withNewKey(operation, mintKey()) : operation;
      const waitMs = Math.min(serverRetryAfterMs(error), policy.maxDelayMs);
      // Always set, so that a hint does not outlive the error that gave it.
      return makeOperation(op.kind, op, { [notBeforeField]: waitMs > 0 ? Date.now() + waitMs : 0, [newSessionField]: renew });
    },
  };
}

/**
 * Holds an operation until its retryNotBefore, and gives an unsafe retry
 * the new checkout session it asks for; passes the others on at once.
 */
export function retryAfterExchange(newSession?: () => Promise<string | null>): Exchange {
  return mapExchange({
    onOperation(operation) {
      const notBefore: unknown = operation.context[notBeforeField];
      const waitMs = typeof notBefore === 'number' ? notBefore - Date.now() : 0;
      const renew = operation.context[newSessionField] === true && newSession !== undefined;
      if (waitMs <= 0 && !renew) return;
      // mapExchange drops the operation if it is torn down meanwhile.
      return (async () => {
        if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
        const secret = renew ? await newSession().catch(() => null) : null;
        return secret ? withSession(operation, secret) : operation;
      })();
    },
  });
}

/** The chargeCard operation with input.checkoutSession set to secret, for unsafe mode. */
export function withSession(operation: Operation, secret: string): Operation {
  const vars = operation.variables as { input?: Record<string, unknown> } | undefined;
  if (operation.kind !== 'mutation' || !vars?.input) return operation;
  const variables = { ...vars, input: { ...vars.input, checkoutSession: secret } };
  return makeOperation(operation.kind, { ...operation, variables }, operation.context);
}

/**
 * The operation with another idempotencyKey variable, for unsafe mode; an
 * operation without one (or a query) is returned as it is. The operation key
 * stays, so that the client still routes the result to the caller.
 */
export function withNewKey(operation: Operation, key: string): Operation {
  if (!carriesKey(operation)) return operation;
  const vars = operation.variables as Record<string, unknown>;
  return makeOperation(operation.kind, { ...operation, variables: { ...vars, idempotencyKey: key } }, operation.context);
}

/** Whether operation is a mutation with an idempotencyKey variable: what unsafe mode gives a new key. */
function carriesKey(operation: Operation): boolean {
  const vars = operation.variables as Record<string, unknown> | undefined;
  return operation.kind === 'mutation' && typeof vars?.idempotencyKey === 'string';
}

/** Polling a PROCESSING attempt: every retryAfterMs at first, then slower. */
export const pollPolicy = {
  /** Used when the answer has no retryAfterMs. */
  defaultDelayMs: 1_000,
  /** Polls at the server's pace before backing off. */
  steadyPolls: 5,
  maxDelayMs: 15_000,
} as const;

/**
 * How long to wait before poll number poll (0 for the first) of an attempt
 * that answered PROCESSING with retryAfterMs. Never sooner than the server
 * asked; after steadyPolls the wait doubles, up to maxDelayMs, so that an
 * attempt that stays PROCESSING (a lost provider answer) is not polled every
 * second forever.
 */
export function pollDelayMs(retryAfterMs: number | null | undefined, poll: number): number {
  const base = retryAfterMs && retryAfterMs > 0 ? retryAfterMs : pollPolicy.defaultDelayMs;
  const extra = Math.max(0, poll - pollPolicy.steadyPolls + 1);
  return Math.max(base, Math.min(base * 2 ** extra, pollPolicy.maxDelayMs));
}
