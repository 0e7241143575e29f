// How long to wait before sending the same key again: full-jitter
// exponential backoff, unless the server said how long (its hint wins),
// both capped; and the hint read from an answer. Pure: the random number and
// the clock come in as arguments.
import type { RetryOptions } from './types.js';

// The budget is the bound that matters: 45 s of sends under one key. The
// attempt count only stops a pathological loop; full jitter can draw short
// waits, and a 10 s outage must not spend the sends before the network is
// back.
export const retryDefaults: Readonly<Required<RetryOptions>> = {
  baseMs: 400,
  capMs: 10_000,
  budgetMs: 45_000,
  maxAttempts: 30,
};

/** The options with every default filled in. */
export function retryPolicy(o: RetryOptions = {}): Required<RetryOptions> {
  return {
    baseMs: o.baseMs ?? retryDefaults.baseMs,
    capMs: o.capMs ?? retryDefaults.capMs,
    budgetMs: o.budgetMs ?? retryDefaults.budgetMs,
    maxAttempts: o.maxAttempts ?? retryDefaults.maxAttempts,
  };
}

/**
 * Full jitter (AWS's "Exponential Backoff and Jitter"): a wait drawn
 * uniformly from [0, min(cap, base·2^retry)). retry is 0 for the first
 * retry; jitter is a number in [0, 1).
 */
export function backoffMs(retry: number, jitter: number, p: Required<RetryOptions>): number {
  const ceiling = Math.min(p.capMs, p.baseMs * 2 ** Math.max(0, retry));
  return Math.floor(clamp01(jitter) * ceiling);
}

/** The wait before the next send: the server's hint when it gave one, else backoff; never more than capMs. */
export function retryWaitMs(retry: number, jitter: number, hintMs: number | undefined, p: Required<RetryOptions>): number {
  if (hintMs !== undefined && hintMs >= 0) return Math.min(hintMs, p.capMs);
  return backoffMs(retry, jitter, p);
}

/**
 * A Retry-After header in milliseconds: delta-seconds (RFC 9110, seconds,
 * not milliseconds) or an HTTP date, relative to now. undefined when absent
 * or unreadable; a date in the past is 0.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value == null) return undefined;
  const v = value.trim();
  if (v === '') return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // An HTTP date names its day and month ("Sun, 06 Nov 1994 08:49:37 GMT").
  const at = /[a-z]/i.test(v) ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/**
 * The server's hint, by precedence: extensions.retryAfterMs (or the
 * payload's retryAfterMs), then the Retry-After header.
 */
export function hintMs(retryAfterMs: unknown, retryAfterHeader: string | null | undefined, now: number): number | undefined {
  if (typeof retryAfterMs === 'number' && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) return retryAfterMs;
  return parseRetryAfter(retryAfterHeader, now);
}

function clamp01(x: number): number {
  if (!(x > 0)) return 0;
  return x >= 1 ? 0.999999 : x;
}
