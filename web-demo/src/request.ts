// The demo's own GraphQL requests, beside the charger's: the question about
// a slow chargeCard (slow.ts) and unsafe mode's naive sender (unsafe.ts).
// They go through the same recording fetch as the charger's. The charger
// keeps its own reading of an answer to itself; this is the demo's, kept as
// small as these two uses need.
import type { ChargePayload, ServerError } from '@chargeonce/client';

/** The codes after which the same request may be sent again: the server ran nothing, or a retry is always safe. */
export const retryableCodes: ReadonlySet<string> = new Set(['SERVICE_UNAVAILABLE', 'RATE_LIMITED', 'REQUEST_TIMEOUT', 'INTERNAL_SERVER_ERROR']);

/** What one request came back with. */
export type Answer =
  /** The field's payload; null: chargeStatus knows no such key. */
  | { kind: 'payload'; payload: ChargePayload | null }
  /** A GraphQL error; hintMs: the server's extensions.retryAfterMs. */
  | { kind: 'error'; error: ServerError; retryable: boolean; hintMs?: number }
  /** No GraphQL answer at all: the outcome is unknown. */
  | { kind: 'lost'; reason: string };

interface Body {
  data?: Record<string, ChargePayload | null> | null;
  errors?: { message?: string; extensions?: { code?: unknown; retryAfterMs?: unknown } }[];
}

/** What the body of an HTTP answer means for field. */
export function classify(field: string, http: number, text: string): Answer {
  let body: Body;
  try {
    body = JSON.parse(text) as Body;
  } catch {
    return { kind: 'lost', reason: `HTTP ${http}: not a GraphQL answer` };
  }
  if (body?.data && field in body.data && (body.data[field] !== null || !body.errors?.length)) {
    return { kind: 'payload', payload: body.data[field] ?? null };
  }
  const first = body?.errors?.[0];
  if (!first) return { kind: 'lost', reason: `HTTP ${http}: no data in the answer` };
  const code = typeof first.extensions?.code === 'string' ? first.extensions.code : 'UNKNOWN';
  const hint = first.extensions?.retryAfterMs;
  return {
    kind: 'error',
    error: { code, message: first.message ?? code },
    retryable: body.errors!.every((e) => typeof e.extensions?.code === 'string' && retryableCodes.has(e.extensions.code)),
    ...(typeof hint === 'number' && hint > 0 ? { hintMs: hint } : {}),
  };
}

const result = `idempotencyKey status replayed retryAfterMs expiresAt
  charge { id amount currency orderId providerChargeId createdAt }
  failure { code message }`;

export const chargeCardQuery = `mutation ChargeCard($idempotencyKey: String!, $input: ChargeCardInput!) {
  chargeCard(idempotencyKey: $idempotencyKey, input: $input) { ${result} }
}`;

export const chargeStatusQuery = `query SessionChargeStatus($idempotencyKey: String!, $checkoutSession: String!) {
  chargeStatus(idempotencyKey: $idempotencyKey, checkoutSession: $checkoutSession) { ${result} }
}`;

export interface Endpoint {
  url: string;
  fetch: typeof fetch;
  /** The publishable key the page pays with. */
  publishableKey: string;
}

/** POSTs one operation and classifies its answer as the charger does. It never throws. */
export async function send(
  to: Endpoint,
  operationName: 'ChargeCard' | 'SessionChargeStatus',
  variables: Record<string, unknown>,
): Promise<Answer> {
  const field = operationName === 'ChargeCard' ? 'chargeCard' : 'chargeStatus';
  const query = operationName === 'ChargeCard' ? chargeCardQuery : chargeStatusQuery;
  try {
    const res = await to.fetch(to.url, {
      method: 'POST',
      headers: { Authorization: `Bearer ${to.publishableKey}`, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ operationName, query, variables }),
    });
    const text = await res.text();
    return classify(field, res.status, text);
  } catch (err) {
    return { kind: 'lost', reason: err instanceof Error ? err.message : String(err) };
  }
}
