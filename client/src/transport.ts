// The one POST the charger sends (chargeCard, chargeStatus), and what its
// answer means for the retry loop. chargeCard always goes over HTTP POST,
// never over a websocket: that is where chargeonce reads the
// Idempotency-Key, the body limit and the rate limits.
import { hintMs } from './backoff.js';
import type { ChargerEvent } from './events.js';
import { nothingRanCodes, unknownOutcomeCodes } from './generated/errorcodes.js';
import type { ChargePayload, ServerError } from './types.js';

/** What one request came back with: P is the field's payload type (chargeCard's by default). */
export type Answer<P = ChargePayload> =
  /** A GraphQL answer with the field's payload; null: a status query knows no such key. */
  | { kind: 'payload'; payload: P | null; http: number }
  /** A GraphQL error. retryable: the server ran nothing (or a retry is always safe) and asks for another try. */
  | { kind: 'error'; error: ServerError; retryable: boolean; hintMs?: number; http: number }
  /** No GraphQL answer at all (network error, timeout, a proxy's HTML page): the outcome is unknown. */
  | { kind: 'lost'; reason: string; http?: number; hintMs?: number };

export { nothingRanCodes };

/**
 * The codes after which the same request, with the same key, may be sent
 * again: nothing ran, or the outcome is unknown and a retry finds it out.
 * Generated from the server's own list (make generate).
 */
export const retryableCodes: ReadonlySet<string> = new Set([...nothingRanCodes, ...unknownOutcomeCodes]);

/** A request unanswered after this long is a lost one. */
export const requestTimeoutMsDefault = 30_000;

export interface GraphQLRequest {
  operationName: string;
  query: string;
  variables: Record<string, unknown>;
}

export interface PostOptions {
  fetch: typeof fetch;
  endpoint: string;
  headers: Record<string, string>;
  /** Ends the request: an abort is a lost answer (the outcome is unknown), not an error. */
  signal?: AbortSignal;
  /** A request that has not answered by then is a lost one. */
  timeoutMs: number;
  now: () => number;
}

/** Sends req as POST application/json and classifies what came back. It never throws. */
export async function post<P = ChargePayload>(req: GraphQLRequest, field: string, o: PostOptions): Promise<Answer<P>> {
  const ctl = new AbortController();
  const stop = () => ctl.abort();
  o.signal?.addEventListener('abort', stop);
  const timer = setTimeout(stop, o.timeoutMs);
  try {
    const res = await o.fetch(o.endpoint, {
      method: 'POST',
      headers: { ...o.headers, 'Content-Type': 'application/json', Accept: 'application/graphql-response+json, application/json' },
      body: JSON.stringify(req),
      signal: ctl.signal,
    });
    // The whole body before deciding: a response cut short is a lost one.
    const text = await res.text();
    return classify<P>(field, res.status, text, res.headers.get('Retry-After'), o.now());
  } catch (err) {
    return { kind: 'lost', reason: ctl.signal.aborted ? 'no answer in time' : describe(err) };
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener('abort', stop);
  }
}

interface Body {
  data?: Record<string, unknown> | null;
  errors?: { message?: unknown; extensions?: { code?: unknown; field?: unknown; retryAfterMs?: unknown; [k: string]: unknown } }[];
}

/** What an HTTP answer means: the field's payload, a GraphQL error, or no GraphQL answer at all. */
export function classify<P = ChargePayload>(field: string, http: number, text: string, retryAfter: string | null, now: number): Answer<P> {
  const header = hintMs(undefined, retryAfter, now);
  let body: Body;
  try {
    body = JSON.parse(text) as Body;
  } catch {
    return lost(`HTTP ${http}: not a GraphQL answer`, http, header);
  }
  if (body === null || typeof body !== 'object') return lost(`HTTP ${http}: not a GraphQL answer`, http, header);
  const data = body.data && typeof body.data === 'object' ? body.data : undefined;
  if (data && field in data && (data[field] !== null || !body.errors?.length)) {
    return { kind: 'payload', payload: (data[field] as P | null) ?? null, http };
  }
  const errors = Array.isArray(body.errors) ? body.errors : [];
  const first = errors[0];
  if (!first) return lost(`HTTP ${http}: no data in the answer`, http, header);
  const code = typeof first.extensions?.code === 'string' ? first.extensions.code : 'UNKNOWN';
  const error: ServerError = { code, message: typeof first.message === 'string' ? first.message : code };
  if (typeof first.extensions?.field === 'string') error.field = first.extensions.field;
  const { code: _c, field: _f, retryAfterMs: _r, ...more } = first.extensions ?? {};
  if (Object.keys(more).length > 0) error.extensions = more;
  const retryable = errors.every((e) => typeof e.extensions?.code === 'string' && retryableCodes.has(e.extensions.code));
  const hint = hintMs(first.extensions?.retryAfterMs, retryAfter, now);
  return { kind: 'error', error, retryable, http, ...(hint !== undefined ? { hintMs: hint } : {}) };
}

function lost(reason: string, http: number, hint: number | undefined): Answer<never> {
  return { kind: 'lost', reason, http, ...(hint !== undefined ? { hintMs: hint } : {}) };
}

export function describe(err: unknown): string {
  return err instanceof Error ? err.message || err.name : String(err);
}

/**
 * The answer event for what a request of key came back with: the one
 * reading of an Answer that the charger reports, exported so that a page's
 * own requests (post) are reported in the same words.
 */
export function answerEvent(key: string, operation: 'chargeCard' | 'chargeStatus', a: Answer): Extract<ChargerEvent, { type: 'answer' }> {
  const p = a.kind === 'payload' ? a.payload : undefined;
  return {
    type: 'answer',
    key,
    operation,
    ...(a.http !== undefined && { http: a.http }),
    ...(a.kind === 'payload' && { status: p?.status ?? null, ...(p && { replayed: p.replayed }), ...(p?.nextAction && { nextAction: p.nextAction.type }) }),
    ...(a.kind === 'error' && { code: a.error.code }),
    ...(a.kind === 'lost' && { reason: a.reason }),
    ...(a.kind !== 'payload' && a.hintMs !== undefined && { hintMs: a.hintMs }),
  };
}
