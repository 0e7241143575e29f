import { describe, expect, it } from 'vitest';
import { backoffMs, hintMs, parseRetryAfter, retryPolicy, retryWaitMs } from '../src/backoff.js';

const p = retryPolicy({ baseMs: 100, capMs: 2_000 });
const now = Date.parse('2026-03-01T12:00:00Z');

describe('full-jitter backoff', () => {
  it('stays within [0, min(cap, base·2^n))', () => {
    for (let n = 0; n < 10; n++) {
      const ceiling = Math.min(2_000, 100 * 2 ** n);
      expect(backoffMs(n, 0, p)).toBe(0);
      expect(backoffMs(n, 0.999999, p)).toBeLessThan(ceiling);
      expect(backoffMs(n, 0.999999, p)).toBeGreaterThanOrEqual(ceiling - 1);
      expect(backoffMs(n, 0.5, p)).toBe(Math.floor(ceiling / 2));
    }
  });

  it('is capped', () => {
    expect(backoffMs(30, 0.99, p)).toBeLessThan(2_000);
  });

  it('clamps a jitter outside [0, 1)', () => {
    expect(backoffMs(0, -1, p)).toBe(0);
    expect(backoffMs(0, 1, p)).toBeLessThan(100);
    expect(backoffMs(0, Number.NaN, p)).toBe(0);
  });
});

describe('the server\'s hint', () => {
  it('wins over backoff, capped at capMs', () => {
    expect(retryWaitMs(0, 0.1, 1_500, p)).toBe(1_500);
    expect(retryWaitMs(5, 0.9, 60_000, p)).toBe(2_000);
    expect(retryWaitMs(0, 0.5, undefined, p)).toBe(50);
  });

  it('Retry-After in seconds, not milliseconds', () => {
    expect(parseRetryAfter('2', now)).toBe(2_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
  });

  it('Retry-After as an HTTP date', () => {
    expect(parseRetryAfter('Sun, 01 Mar 2026 12:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter('Sun, 01 Mar 2026 11:00:00 GMT', now)).toBe(0); // in the past
  });

  it('unreadable or absent Retry-After is no hint', () => {
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter('-3', now)).toBeUndefined();
  });

  it('extensions.retryAfterMs takes precedence over Retry-After', () => {
    expect(hintMs(750, '3', now)).toBe(750);
    expect(hintMs(undefined, '3', now)).toBe(3_000);
    expect(hintMs('750', '3', now)).toBe(3_000);
    expect(hintMs(-5, null, now)).toBeUndefined();
  });
});
