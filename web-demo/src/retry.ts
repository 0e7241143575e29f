// The retry policy of the demo's GraphQL client, for @urql/exchange-retry,
// and the polling policy for PROCESSING answers.
//
// Only network errors are retried: the request may or may not have reached
// the server, and sending it again with the same idempotency key is safe
// because chargeonce answers a repeat with the stored result (replayed: true)
// instead of charging again. A GraphQL error is an answer (a bad input, a key
// reused with another input) and retrying it would get the same answer.
import type { CombinedError, Operation } from '@urql/core';
import { makeOperation } from '@urql/core';
import type { RetryExchangeOptions } from '@urql/exchange-retry';

/** How the client retries a request that got no answer. */
export const retryPolicy = {
  /** The first retry waits 1.5 to 2.5 times this (randomDelay), later ones grow. */
  initialDelayMs: 400,
  maxDelayMs: 4_000,
  randomDelay: true,
  /** Attempts in all, the first one included. */
  maxNumberAttempts: 4,
} as const;

/** Whether an error leaves the outcome unknown, so that a retry may help. */
export function isRetryable(error: CombinedError | undefined | null): boolean {
  return !!error && !!error.networkError && error.graphQLErrors.length === 0;
}

export interface RetryModeOptions {
  /**
   * Unsafe mode, the broken habit that the demo shows beside the right one:
   * every retry of chargeCard mints a new idempotency key, so chargeonce sees
   * a new attempt and charges again. Read at each retry.
   */
  unsafe: () => boolean;
  mintKey: () => string;
}

/** The options for retryExchange. */
export function retryOptions({ unsafe, mintKey }: RetryModeOptions): RetryExchangeOptions {
  return {
    ...retryPolicy,
    retryIf: (error) => isRetryable(error),
    retryWith: (error, operation) => {
      if (!isRetryable(error)) return null;
      return unsafe() ? withNewKey(operation, mintKey()) : operation;
    },
  };
}

/**
 * The operation with another idempotencyKey variable, for unsafe mode; an
 * operation without one (or a query) is returned as it is. The operation key
 * stays, so that the client still routes the result to the caller.
 */
export function withNewKey(operation: Operation, key: string): Operation {
  const vars = operation.variables as Record<string, unknown> | undefined;
  if (operation.kind !== 'mutation' || !vars || typeof vars.idempotencyKey !== 'string') {
    return operation;
  }
  return makeOperation(operation.kind, { ...operation, variables: { ...vars, idempotencyKey: key } }, operation.context);
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
