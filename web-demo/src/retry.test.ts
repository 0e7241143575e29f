import { Client, CombinedError, fetchExchange, gql } from '@urql/core';
import { retryExchange } from '@urql/exchange-retry';
import { describe, expect, it } from 'vitest';
import { isRetryable, pollDelayMs, pollPolicy, retryOptions, retryPolicy } from './retry';

const networkError = () => new CombinedError({ networkError: new TypeError('Failed to fetch') });

describe('isRetryable', () => {
  it('retries a network error: the outcome is unknown', () => {
    expect(isRetryable(networkError())).toBe(true);
  });

  it.each(['IDEMPOTENCY_KEY_REUSED', 'BAD_USER_INPUT', 'UNAUTHENTICATED', 'INTERNAL_SERVER_ERROR'])(
    'does not retry a GraphQL error (%s): it is an answer',
    (code) => {
      const e = new CombinedError({ graphQLErrors: [{ message: 'no', extensions: { code } }] });
      expect(isRetryable(e)).toBe(false);
    },
  );

  it('does not retry without an error', () => {
    expect(isRetryable(undefined)).toBe(false);
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

// The policy at work in a real urql client whose fetch loses the first answer.
const chargeCard = gql`
  mutation ChargeCard($idempotencyKey: String!, $input: ChargeCardInput!) {
    chargeCard(idempotencyKey: $idempotencyKey, input: $input) {
      status
      replayed
    }
  }
`;

function flakyClient(opts: { unsafe: boolean; failures: number; graphQLError?: string }) {
  const sentKeys: string[] = [];
  let minted = 0;
  const fetch: typeof globalThis.fetch = async (_url, init) => {
    const body = JSON.parse(String(init?.body)) as { variables: { idempotencyKey: string } };
    sentKeys.push(body.variables.idempotencyKey);
    if (sentKeys.length <= opts.failures) throw new TypeError('Failed to fetch');
    const answer = opts.graphQLError
      ? { errors: [{ message: 'refused', extensions: { code: opts.graphQLError } }] }
      : { data: { chargeCard: { status: 'SUCCEEDED', replayed: sentKeys.length > 1 && !opts.unsafe } } };
    return new Response(JSON.stringify(answer), { headers: { 'Content-Type': 'application/json' } });
  };
  const options = retryOptions({ unsafe: () => opts.unsafe, mintKey: () => `retry-key-${++minted}` });
  const client = new Client({
    url: 'http://test/graphql',
    // No waiting in unit tests; the delays themselves are the exchange's.
    exchanges: [retryExchange({ ...options, initialDelayMs: 1, maxDelayMs: 1 }), fetchExchange],
    fetch,
  });
  const pay = () =>
    client
      .mutation(chargeCard, { idempotencyKey: 'attempt-key', input: { amount: 100, currency: 'USD', paymentMethod: 'pm_card_visa' } })
      .toPromise();
  return { pay, sentKeys };
}

describe('retry policy in the client', () => {
  it('retries a lost answer with the same key', async () => {
    const c = flakyClient({ unsafe: false, failures: 1 });
    const res = await c.pay();
    expect(res.error).toBeUndefined();
    expect(res.data).toEqual({ chargeCard: { status: 'SUCCEEDED', replayed: true } });
    expect(c.sentKeys).toEqual(['attempt-key', 'attempt-key']);
  });

  it('gives up after maxNumberAttempts with a network error, still one key', async () => {
    const c = flakyClient({ unsafe: false, failures: 100 });
    const res = await c.pay();
    expect(isRetryable(res.error)).toBe(true);
    expect(c.sentKeys).toHaveLength(retryPolicy.maxNumberAttempts);
    expect(new Set(c.sentKeys)).toEqual(new Set(['attempt-key']));
  });

  it('does not retry a GraphQL error', async () => {
    const c = flakyClient({ unsafe: false, failures: 0, graphQLError: 'IDEMPOTENCY_KEY_REUSED' });
    const res = await c.pay();
    expect(res.error?.graphQLErrors[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(c.sentKeys).toEqual(['attempt-key']);
  });

  it('in unsafe mode mints a new key for each retry: what not to do', async () => {
    const c = flakyClient({ unsafe: true, failures: 2 });
    const res = await c.pay();
    expect(res.data?.chargeCard.status).toBe('SUCCEEDED');
    expect(c.sentKeys).toEqual(['attempt-key', 'retry-key-1', 'retry-key-2']);
  });
});
