import { describe, expect, it } from 'vitest';
import { subscription } from '../src/stream.js';
import { chargeCardDocument, chargeStatusDocument } from '../src/generated/operations.js';
import { answerEvent, classify, nothingRanCodes, post, retryableCodes } from '../src/transport.js';

const now = Date.parse('2026-03-01T12:00:00Z');
const j = (b: unknown) => JSON.stringify(b);

describe('classify', () => {
  it('a payload', () => {
    const a = classify('chargeCard', 200, j({ data: { chargeCard: { status: 'SUCCEEDED', idempotencyKey: 'k', replayed: true } } }), null, now);
    expect(a).toMatchObject({ kind: 'payload', payload: { status: 'SUCCEEDED', replayed: true }, http: 200 });
  });

  it('chargeStatus null: a key the server never saw', () => {
    expect(classify('chargeStatus', 200, j({ data: { chargeStatus: null } }), null, now)).toEqual({ kind: 'payload', payload: null, http: 200 });
  });

  it('a proxy\'s HTML 502 is lost (unknown outcome), with its Retry-After', () => {
    expect(classify('chargeCard', 502, '<html>Bad Gateway</html>', '3', now)).toEqual({ kind: 'lost', reason: 'HTTP 502: not a GraphQL answer', http: 502, hintMs: 3000 });
  });

  it('SERVICE_UNAVAILABLE is retryable, extensions.retryAfterMs before Retry-After', () => {
    const a = classify('chargeCard', 503, j({ errors: [{ message: 'db', extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1200 } }] }), '5', now);
    expect(a).toMatchObject({ kind: 'error', retryable: true, hintMs: 1200, http: 503, error: { code: 'SERVICE_UNAVAILABLE' } });
  });

  it('RATE_LIMITED with only Retry-After (seconds)', () => {
    const a = classify('chargeCard', 429, j({ errors: [{ message: 'slow', extensions: { code: 'RATE_LIMITED' } }] }), '2', now);
    expect(a).toMatchObject({ kind: 'error', retryable: true, hintMs: 2000 });
  });

  it('BAD_USER_INPUT is an answer, with its field', () => {
    const a = classify('chargeCard', 200, j({ errors: [{ message: 'bad', extensions: { code: 'BAD_USER_INPUT', field: 'amount' } }], data: null }), null, now);
    expect(a).toEqual({ kind: 'error', retryable: false, http: 200, error: { code: 'BAD_USER_INPUT', message: 'bad', field: 'amount' } });
  });

  it("an error's other extensions come with it: what remains refundable", () => {
    const body = { errors: [{ message: 'too much', extensions: { code: 'REFUND_EXCEEDS_CHARGE', field: 'input.amount', refundable: 700 } }], data: null };
    const a = classify('refundCharge', 200, j(body), null, now);
    expect(a).toEqual({
      kind: 'error',
      retryable: false,
      http: 200,
      error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'too much', field: 'input.amount', extensions: { refundable: 700 } },
    });
  });

  it('JSON without data or errors is lost', () => {
    expect(classify('chargeCard', 200, j({}), null, now).kind).toBe('lost');
  });
});

describe("the server's error codes (generated from its list)", () => {
  it('retries what README says: what ran nothing, and an unknown outcome', () => {
    expect([...nothingRanCodes].sort()).toEqual(['RATE_LIMITED', 'REQUEST_TIMEOUT', 'SERVICE_UNAVAILABLE']);
    expect([...retryableCodes].sort()).toEqual(['INTERNAL_SERVER_ERROR', 'RATE_LIMITED', 'REQUEST_TIMEOUT', 'SERVICE_UNAVAILABLE']);
  });

  it.each([...retryableCodes])('%s is retried', (code) => {
    expect(classify('chargeCard', 200, j({ errors: [{ message: 'm', extensions: { code } }] }), null, now)).toMatchObject({ kind: 'error', retryable: true });
  });
});

describe('the documents', () => {
  it.each([
    ['chargeCard', chargeCardDocument],
    ['chargeStatus', chargeStatusDocument],
    ['chargeUpdated', subscription.query],
  ])('%s asks for nextAction', (_, doc) => {
    expect(doc.replace(/\s+/g, ' ')).toContain('nextAction{type url expiresAt}');
  });
});

describe('post', () => {
  it('POSTs JSON with the headers, and turns a thrown fetch into lost', async () => {
    let seen: RequestInit | undefined;
    const a = await post({ operationName: 'X', query: 'q', variables: {} }, 'x', {
      fetch: async (_u, init) => {
        seen = init;
        throw new TypeError('Failed to fetch');
      },
      endpoint: '/graphql',
      headers: { Authorization: 'Bearer co_pk_1' },
      timeoutMs: 1000,
      now: () => now,
    });
    expect(a).toEqual({ kind: 'lost', reason: 'Failed to fetch' });
    expect(seen?.method).toBe('POST');
    expect(new Headers(seen?.headers).get('Content-Type')).toBe('application/json');
    expect(new Headers(seen?.headers).get('Authorization')).toBe('Bearer co_pk_1');
  });

  it('a request that hangs past the timeout is lost', async () => {
    const a = await post({ operationName: 'X', query: 'q', variables: {} }, 'x', {
      fetch: (_u, init) =>
        new Promise((_, reject) => init?.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')))),
      endpoint: '/graphql',
      headers: {},
      timeoutMs: 10,
      now: () => now,
    });
    expect(a).toEqual({ kind: 'lost', reason: 'no answer in time' });
  });
});

describe('answerEvent: the one reading of an answer the charger reports', () => {
  const nextAction = { type: 'REDIRECT' as const, url: 'https://bank.example/c', expiresAt: '2099-01-01T00:00:00Z' };
  const payload = (over: object) => ({ idempotencyKey: 'k', status: 'PROCESSING' as const, replayed: false, charge: null, failure: null, ...over });

  it('a payload: its status, replayed, and the type of its nextAction', () => {
    expect(answerEvent('k', 'chargeCard', { kind: 'payload', payload: payload({ nextAction }), http: 200 })).toEqual({
      type: 'answer',
      key: 'k',
      operation: 'chargeCard',
      http: 200,
      status: 'PROCESSING',
      replayed: false,
      nextAction: 'REDIRECT',
    });
    expect(answerEvent('k', 'chargeCard', { kind: 'payload', payload: payload({ status: 'SUCCEEDED', replayed: true, nextAction: null }), http: 200 })).toEqual({
      type: 'answer',
      key: 'k',
      operation: 'chargeCard',
      http: 200,
      status: 'SUCCEEDED',
      replayed: true,
    });
  });

  it('chargeStatus null: a key the server never saw', () => {
    expect(answerEvent('k', 'chargeStatus', { kind: 'payload', payload: null, http: 200 })).toEqual({ type: 'answer', key: 'k', operation: 'chargeStatus', http: 200, status: null });
  });

  it("an error: its code and the server's hint", () => {
    const busy = classify('chargeCard', 503, j({ errors: [{ message: 'db', extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs: 2000 } }] }), '5', now);
    expect(answerEvent('k', 'chargeCard', busy)).toEqual({ type: 'answer', key: 'k', operation: 'chargeCard', http: 503, code: 'SERVICE_UNAVAILABLE', hintMs: 2000 });
    const refused = classify('chargeCard', 200, j({ errors: [{ message: 'bad', extensions: { code: 'BAD_USER_INPUT' } }], data: null }), null, now);
    expect(answerEvent('k', 'chargeCard', refused)).toEqual({ type: 'answer', key: 'k', operation: 'chargeCard', http: 200, code: 'BAD_USER_INPUT' });
  });

  it('no answer: why, and the HTTP status and hint of a page that was not one', () => {
    expect(answerEvent('k', 'chargeCard', { kind: 'lost', reason: 'Failed to fetch' })).toEqual({ type: 'answer', key: 'k', operation: 'chargeCard', reason: 'Failed to fetch' });
    expect(answerEvent('k', 'chargeCard', classify('chargeCard', 502, '<html>', '3', now))).toEqual({
      type: 'answer',
      key: 'k',
      operation: 'chargeCard',
      http: 502,
      reason: 'HTTP 502: not a GraphQL answer',
      hintMs: 3000,
    });
  });

  it('a partial answer (the payload and an error) is the payload, as the charger takes it', () => {
    const body = { data: { chargeCard: payload({ status: 'SUCCEEDED', replayed: true }) }, errors: [{ message: 'a field failed', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] };
    expect(answerEvent('k', 'chargeCard', classify('chargeCard', 200, j(body), null, now))).toMatchObject({ status: 'SUCCEEDED', replayed: true });
    expect(answerEvent('k', 'chargeCard', classify('chargeCard', 200, j(body), null, now))).not.toHaveProperty('code');
  });
});
