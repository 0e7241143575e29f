import { Client, CombinedError, fetchExchange, gql } from '@urql/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  isRetryable,
  pollDelayMs,
  pollPolicy,
  retryExchanges,
  retryPolicy,
  serverRetryAfterMs,
  type RetryPolicy,
} from './retry';

const networkError = () => new CombinedError({ networkError: new TypeError('Failed to fetch') });
const graphQLError = (extensions: Record<string, unknown>) =>
  new CombinedError({ graphQLErrors: [{ message: 'no', extensions }] });

describe('isRetryable', () => {
  it('retries a network error: the outcome is unknown', () => {
    expect(isRetryable(networkError())).toBe(true);
  });

  it.each([
    ['SERVICE_UNAVAILABLE', true],
    ['RATE_LIMITED', true],
    ['INTERNAL_SERVER_ERROR', true],
    ['BAD_USER_INPUT', false],
    ['IDEMPOTENCY_KEY_REUSED', false],
    ['ORDER_ALREADY_PAID', false],
    ['UNAUTHENTICATED', false],
    ['REQUEST_TOO_LARGE', false],
    ['BAD_REQUEST', false],
    ['REQUEST_TIMEOUT', true],
    ['SOMETHING_NEW', false],
  ])('GraphQL error %s: retryable %s', (code, retryable) => {
    expect(isRetryable(graphQLError({ code }))).toBe(retryable);
  });

  it('does not retry a GraphQL error without a code', () => {
    expect(isRetryable(graphQLError({}))).toBe(false);
  });

  it('does not retry when one of the errors is an answer', () => {
    const e = new CombinedError({
      graphQLErrors: [
        { message: 'busy', extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 } },
        { message: 'bad', extensions: { code: 'BAD_USER_INPUT' } },
      ],
    });
    expect(isRetryable(e)).toBe(false);
  });

  it('does not retry without an error', () => {
    expect(isRetryable(undefined)).toBe(false);
  });
});

describe('serverRetryAfterMs', () => {
  it('reads extensions.retryAfterMs, the longest of several', () => {
    expect(serverRetryAfterMs(graphQLError({ code: 'RATE_LIMITED', retryAfterMs: 250 }))).toBe(250);
    const two = new CombinedError({
      graphQLErrors: [
        { message: 'a', extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 } },
        { message: 'b', extensions: { code: 'RATE_LIMITED', retryAfterMs: 3000 } },
      ],
    });
    expect(serverRetryAfterMs(two)).toBe(3000);
  });

  it('is 0 without a usable hint', () => {
    expect(serverRetryAfterMs(networkError())).toBe(0);
    expect(serverRetryAfterMs(graphQLError({ code: 'INTERNAL_SERVER_ERROR' }))).toBe(0);
    expect(serverRetryAfterMs(graphQLError({ code: 'RATE_LIMITED', retryAfterMs: '1000' }))).toBe(0);
    expect(serverRetryAfterMs(graphQLError({ code: 'RATE_LIMITED', retryAfterMs: -5 }))).toBe(0);
    expect(serverRetryAfterMs(undefined)).toBe(0);
  });
});

describe('pollDelayMs', () => {
  it('waits what the server asked for at first', () => {
    for (let i = 0; i < pollPolicy.steadyPolls; i++) expect(pollDelayMs(1000, i)).toBe(1000);
  });

  it('backs off, up to a cap, when the attempt stays PROCESSING', () => {
    expect(pollDelayMs(1000, pollPolicy.steadyPolls)).toBe(2000);
    expect(pollDelayMs(1000, pollPolicy.steadyPolls + 1)).toBe(4000);
    expect(pollDelayMs(1000, 100)).toBe(pollPolicy.maxDelayMs);
  });

  it('never polls sooner than the server asked', () => {
    expect(pollDelayMs(60_000, 100)).toBe(60_000);
  });

  it('has a default when the answer has no retryAfterMs', () => {
    expect(pollDelayMs(null, 0)).toBe(pollPolicy.defaultDelayMs);
    expect(pollDelayMs(0, 0)).toBe(pollPolicy.defaultDelayMs);
  });
});

// The policy at work in a real urql client, whose fetch plays a script of
// answers: a lost one, an HTTP error with a GraphQL error body, or data.
const chargeCard = gql`
  mutation ChargeCard($idempotencyKey: String!, $input: ChargeCardInput!) {
    chargeCard(idempotencyKey: $idempotencyKey, input: $input) {
      status
      replayed
    }
  }
`;

type Answer = 'lost' | { status: number; code: string; retryAfterMs?: number } | 'succeeded';

const lost = 'lost' as const;
const succeeded = 'succeeded' as const;
const refused = (status: number, code: string, retryAfterMs?: number): Answer => ({ status, code, retryAfterMs });

function scriptedClient(opts: {
  unsafe?: boolean;
  answers: Answer[];
  policy?: Readonly<RetryPolicy>;
  newSession?: () => Promise<string | null>;
}) {
  const sent: { key: string; session: string; at: number }[] = [];
  let minted = 0;
  const fetch: typeof globalThis.fetch = async (_url, init) => {
    const body = JSON.parse(String(init?.body)) as { variables: { idempotencyKey: string; input: { checkoutSession: string } } };
    sent.push({ key: body.variables.idempotencyKey, session: body.variables.input.checkoutSession, at: Date.now() });
    const a = opts.answers[Math.min(sent.length, opts.answers.length) - 1];
    if (a === 'lost') throw new TypeError('Failed to fetch');
    if (a === 'succeeded') {
      const data = { chargeCard: { status: 'SUCCEEDED', replayed: sent.length > 1 && !opts.unsafe } };
      return new Response(JSON.stringify({ data }), { headers: { 'Content-Type': 'application/json' } });
    }
    // As chargeonce answers: a GraphQL error body, with the HTTP status and Retry-After.
    const extensions = { code: a.code, ...(a.retryAfterMs ? { retryAfterMs: a.retryAfterMs } : {}) };
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (a.retryAfterMs) headers['Retry-After'] = String(Math.ceil(a.retryAfterMs / 1000));
    return new Response(JSON.stringify({ errors: [{ message: 'refused', extensions }] }), { status: a.status, headers });
  };
  const client = new Client({
    url: 'http://test/graphql',
    exchanges: [
      ...retryExchanges({ unsafe: () => !!opts.unsafe, mintKey: () => `retry-key-${++minted}`, newSession: opts.newSession }, opts.policy),
      fetchExchange,
    ],
    fetch,
  });
  const pay = () =>
    client
      .mutation(chargeCard, { idempotencyKey: 'attempt-key', input: { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_cart' } })
      .toPromise();
  const sentKeys = () => sent.map((s) => s.key);
  const sentSessions = () => sent.map((s) => s.session);
  /** Milliseconds between request i and the one before it. */
  const gap = (i: number) => sent[i].at - sent[i - 1].at;
  return { pay, sent, sentKeys, sentSessions, gap };
}

// No waiting in these tests; the delays themselves are the exchange's.
const instant: RetryPolicy = { ...retryPolicy, initialDelayMs: 1, maxDelayMs: 1 };

describe('retry policy in the client', () => {
  it('retries a lost answer with the same key', async () => {
    const c = scriptedClient({ answers: [lost, succeeded], policy: instant });
    const res = await c.pay();
    expect(res.error).toBeUndefined();
    expect(res.data).toEqual({ chargeCard: { status: 'SUCCEEDED', replayed: true } });
    expect(c.sentKeys()).toEqual(['attempt-key', 'attempt-key']);
  });

  it('gives up after maxNumberAttempts with a network error, still one key', async () => {
    const c = scriptedClient({ answers: [lost], policy: instant });
    const res = await c.pay();
    expect(isRetryable(res.error)).toBe(true);
    expect(c.sentKeys()).toHaveLength(retryPolicy.maxNumberAttempts);
    expect(new Set(c.sentKeys())).toEqual(new Set(['attempt-key']));
  });

  it.each([
    [200, 'IDEMPOTENCY_KEY_REUSED'],
    [200, 'BAD_USER_INPUT'],
    [200, 'ORDER_ALREADY_PAID'],
    [401, 'UNAUTHENTICATED'],
    [413, 'REQUEST_TOO_LARGE'],
    [415, 'BAD_REQUEST'],
    [400, 'BAD_USER_INPUT'],
  ])('does not retry HTTP %i %s: it is an answer', async (status, code) => {
    const c = scriptedClient({ answers: [refused(status, code), succeeded], policy: instant });
    const res = await c.pay();
    expect(res.error?.graphQLErrors[0]?.extensions?.code).toBe(code);
    expect(c.sentKeys()).toEqual(['attempt-key']);
  });

  it('in unsafe mode mints a new key for each retry: what not to do', async () => {
    const c = scriptedClient({ unsafe: true, answers: [lost, lost, succeeded], policy: instant });
    const res = await c.pay();
    expect(res.data?.chargeCard.status).toBe('SUCCEEDED');
    expect(c.sentKeys()).toEqual(['attempt-key', 'retry-key-1', 'retry-key-2']);
  });

  it('in unsafe mode each retry is a new order too: a new key on a new checkout session', async () => {
    let carts = 0;
    const newSession = async () => `cs_new-cart-${++carts}`;
    const c = scriptedClient({ unsafe: true, answers: [lost, lost, succeeded], policy: instant, newSession });
    await c.pay();
    expect(c.sentKeys()).toEqual(['attempt-key', 'retry-key-1', 'retry-key-2']);
    expect(c.sentSessions()).toEqual(['cs_cart', 'cs_new-cart-1', 'cs_new-cart-2']);
  });

  it('in unsafe mode, without a new session (the shop did not answer), the retry goes on the old one', async () => {
    const newSession = () => Promise.reject(new TypeError('Failed to fetch'));
    const c = scriptedClient({ unsafe: true, answers: [lost, succeeded], policy: instant, newSession });
    await c.pay();
    expect(c.sentKeys()).toEqual(['attempt-key', 'retry-key-1']);
    expect(c.sentSessions()).toEqual(['cs_cart', 'cs_cart']);
  });

  it('in safe mode a retry keeps its key and its session, and asks the shop for nothing', async () => {
    let asked = 0;
    const c = scriptedClient({ answers: [lost, succeeded], policy: instant, newSession: async () => `cs_${++asked}` });
    await c.pay();
    expect(c.sentSessions()).toEqual(['cs_cart', 'cs_cart']);
    expect(asked).toBe(0);
  });
});

describe('retry after a busy server, on a fake clock', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('urql reports a 503 GraphQL error body as graphQLErrors with the HTTP response, not as a network error', async () => {
    const c = scriptedClient({ answers: [refused(503, 'SERVICE_UNAVAILABLE', 1000)], policy: { ...retryPolicy, maxNumberAttempts: 1 } });
    const res = await c.pay();
    expect(res.error?.networkError).toBeUndefined();
    expect(res.error?.graphQLErrors[0]?.extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 });
    expect((res.error?.response as Response | undefined)?.status).toBe(503);
  });

  it.each([
    [503, 'SERVICE_UNAVAILABLE'],
    [429, 'RATE_LIMITED'],
  ])('retries HTTP %i %s with the same key, no sooner than retryAfterMs', async (status, code) => {
    // Longer than any first backoff (at most 2.5 × initialDelayMs), so the hint decides.
    const c = scriptedClient({ answers: [refused(status, code, 3000), succeeded] });
    const paid = c.pay();
    await vi.advanceTimersByTimeAsync(2999);
    expect(c.sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    const res = await paid;
    expect(res.error).toBeUndefined();
    expect(res.data?.chargeCard.status).toBe('SUCCEEDED');
    expect(c.sentKeys()).toEqual(['attempt-key', 'attempt-key']);
    expect(c.gap(1)).toBe(3000);
  });

  it('waits its own backoff when retryAfterMs is shorter', async () => {
    const c = scriptedClient({ answers: [refused(503, 'SERVICE_UNAVAILABLE', 1), succeeded] });
    const paid = c.pay();
    await vi.advanceTimersByTimeAsync(retryPolicy.maxDelayMs);
    await paid;
    expect(c.sent).toHaveLength(2);
    expect(c.gap(1)).toBeGreaterThanOrEqual(retryPolicy.initialDelayMs * 1.5);
  });

  it('waits no longer than maxDelayMs, whatever the server asks', async () => {
    const c = scriptedClient({ answers: [refused(429, 'RATE_LIMITED', 60_000), succeeded] });
    const paid = c.pay();
    await vi.advanceTimersByTimeAsync(retryPolicy.maxDelayMs);
    await paid;
    expect(c.sent).toHaveLength(2);
    expect(c.gap(1)).toBe(retryPolicy.maxDelayMs);
  });

  it('retries INTERNAL_SERVER_ERROR with the same key after the backoff', async () => {
    const c = scriptedClient({ answers: [refused(200, 'INTERNAL_SERVER_ERROR'), succeeded] });
    const paid = c.pay();
    await vi.advanceTimersByTimeAsync(retryPolicy.maxDelayMs);
    const res = await paid;
    expect(res.data?.chargeCard.status).toBe('SUCCEEDED');
    expect(c.sentKeys()).toEqual(['attempt-key', 'attempt-key']);
    expect(c.gap(1)).toBeGreaterThanOrEqual(retryPolicy.initialDelayMs * 1.5);
  });

  it('shares one attempt budget between network errors and busy answers', async () => {
    const c = scriptedClient({ answers: [lost, refused(503, 'SERVICE_UNAVAILABLE', 1000), refused(429, 'RATE_LIMITED', 1000)] });
    const paid = c.pay();
    await vi.advanceTimersByTimeAsync(retryPolicy.maxNumberAttempts * retryPolicy.maxDelayMs);
    const res = await paid;
    expect(res.error?.graphQLErrors[0]?.extensions?.code).toBe('RATE_LIMITED');
    expect(isRetryable(res.error)).toBe(true);
    expect(c.sentKeys()).toEqual(Array(retryPolicy.maxNumberAttempts).fill('attempt-key'));
    expect(c.gap(2)).toBeGreaterThanOrEqual(1000);
    expect(c.gap(3)).toBeGreaterThanOrEqual(1000);
  });

  it('in unsafe mode mints a new key for a retry of SERVICE_UNAVAILABLE, still after retryAfterMs', async () => {
    const c = scriptedClient({ unsafe: true, answers: [refused(503, 'SERVICE_UNAVAILABLE', 3000), succeeded] });
    const paid = c.pay();
    await vi.advanceTimersByTimeAsync(3000);
    const res = await paid;
    expect(res.data?.chargeCard).toEqual({ status: 'SUCCEEDED', replayed: false });
    expect(c.sentKeys()).toEqual(['attempt-key', 'retry-key-1']);
    expect(c.gap(1)).toBe(3000);
  });
});
