import { describe, expect, it } from 'vitest';
import { subscription } from '../src/stream.js';
import { chargeCardDocument, chargeStatusDocument } from '../src/generated/operations.js';
import { classify, nothingRanCodes, post, retryableCodes } from '../src/transport.js';

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
