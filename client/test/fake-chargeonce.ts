// The one fake chargeonce of the unit tests (test/) and the browser tests
// (browser/), behind the charger's fetch option: chargeCard charges each
// key at most once and replays it (another input under the same key is
// IDEMPOTENCY_KEY_REUSED), chargeStatus answers from what it charged, and
// each chargeCard meets the next step of the test's script. No request
// leaves the process or the page.
import type { Charge } from '../src/types.js';

/**
 * What the next chargeCard meets. charge: charged, answered (the default).
 * lose-after-charge: charged, then the connection breaks. network: the
 * connection breaks before anything runs. html-502: a proxy's page. hold:
 * charged, but the answer never comes (until the caller aborts).
 * processing: PROCESSING until finish(). action: PROCESSING with a
 * nextAction (3-D Secure) until authenticated() or finish(). An object: an
 * error answer with that code (and its HTTP status and retry hints).
 */
export type Step =
  | 'charge'
  | 'lose-after-charge'
  | 'network'
  | 'html-502'
  | 'hold'
  | 'processing'
  | 'action'
  | { code: string; http?: number; retryAfterMs?: number; retryAfter?: string };

/** A request the fake received. */
export interface SentRequest {
  operationName: 'ChargeCard' | 'ChargeStatus';
  /** The attempt's idempotency key (variables.idempotencyKey). */
  key: string;
  variables: { idempotencyKey: string; input?: Record<string, unknown>; checkoutSession?: string };
  headers: Headers;
}

type Stored = { input: unknown; status: 'SUCCEEDED' | 'FAILED' | 'PROCESSING'; action?: boolean; failure?: string; captured?: boolean };

/** When the fake's authorizations lapse. */
export const authorizationExpiresAt = '2026-01-08T00:00:00Z';

/**
 * The charge of key as chargeonce answers it: an AUTOMATIC one captured in
 * full, a MANUAL one an open authorization until the merchant captures it
 * (captured).
 */
export function chargeOf(key: string, input: unknown, captured = false): Charge {
  const details = { id: `ch_${key}`, amount: 2500, currency: 'USD', providerChargeId: `p_${key}`, createdAt: '2026-01-01T00:00:00Z' };
  if ((input as { captureMethod?: string } | null)?.captureMethod === 'MANUAL' && !captured) {
    return { ...details, captureStatus: 'UNCAPTURED', amountCaptured: 0, amountCapturable: 2500, authorizationExpiresAt };
  }
  return { ...details, captureStatus: 'CAPTURED', amountCaptured: 2500, amountCapturable: 0, authorizationExpiresAt: null };
}

export const challengeUrl = (key: string) => `https://bank.example/challenge/${key}`;
export const challengeExpiresAt = '2099-01-01T00:10:00Z';

export class FakeServer {
  readonly requests: SentRequest[] = [];
  readonly charges = new Map<string, Stored>();
  script: Step[] = [];
  /** Every chargeCard and chargeStatus waits for this before answering, when set. */
  gate: Promise<void> | null = null;
  /** New charges are declined (FAILED, card_declined). */
  decline = false;
  /** Called on every request as it arrives, before it is answered: what the page holds at that moment can be read here. */
  onRequest: (r: SentRequest) => void = () => {};

  get chargeCards(): SentRequest[] {
    return this.requests.filter((r) => r.operationName === 'ChargeCard');
  }

  get statusChecks(): SentRequest[] {
    return this.requests.filter((r) => r.operationName === 'ChargeStatus');
  }

  /** The provider's final word on key (for a FAILED one, failure is its code). */
  finish(key: string, status: 'SUCCEEDED' | 'FAILED' = 'SUCCEEDED', failure?: string) {
    const c = this.charges.get(key);
    if (c) {
      c.status = status;
      c.action = false;
      if (failure) c.failure = failure;
    }
  }

  /** The merchant's server captured key's authorization in full. */
  capture(key: string) {
    const c = this.charges.get(key);
    if (c) c.captured = true;
  }

  /** The shopper authenticated: the provider goes on with the charge, no nextAction any more. */
  authenticated(key: string) {
    const c = this.charges.get(key);
    if (c) c.action = false;
  }

  readonly fetch: typeof fetch = async (_url, init) => {
    const body = JSON.parse(String(init?.body)) as { operationName: SentRequest['operationName']; variables: SentRequest['variables'] };
    const key = body.variables.idempotencyKey;
    const req: SentRequest = { operationName: body.operationName, key, variables: body.variables, headers: new Headers(init?.headers) };
    this.requests.push(req);
    this.onRequest(req);
    if (this.gate) await this.gate;
    if (init?.signal?.aborted) throw new DOMException('aborted', 'AbortError');
    if (body.operationName === 'ChargeStatus') {
      return json({ data: { chargeStatus: this.charges.has(key) ? this.payload(key, false) : null } });
    }
    const step = this.script.shift() ?? 'charge';
    if (step === 'network') throw new TypeError('Failed to fetch');
    if (step === 'html-502') return new Response('<html>Bad Gateway</html>', { status: 502, headers: { 'Content-Type': 'text/html' } });
    if (typeof step === 'object') {
      const headers: Record<string, string> = step.retryAfter ? { 'Retry-After': step.retryAfter } : {};
      return json(
        { errors: [{ message: step.code, extensions: { code: step.code, ...(step.retryAfterMs ? { retryAfterMs: step.retryAfterMs } : {}) } }] },
        step.http ?? 200,
        headers,
      );
    }
    const existing = this.charges.get(key);
    if (existing && JSON.stringify(existing.input) !== JSON.stringify(body.variables.input)) {
      return json({ errors: [{ message: 'reused', extensions: { code: 'IDEMPOTENCY_KEY_REUSED' } }] });
    }
    if (!existing) {
      const waits = step === 'processing' || step === 'action';
      this.charges.set(key, { input: body.variables.input, status: waits ? 'PROCESSING' : this.decline ? 'FAILED' : 'SUCCEEDED', action: step === 'action' });
    }
    if (step === 'lose-after-charge') throw new TypeError('Failed to fetch');
    if (step === 'hold') {
      // The charge went through; only its answer never arrives.
      return new Promise<Response>((_, reject) =>
        init?.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))),
      );
    }
    return json({ data: { chargeCard: this.payload(key, !!existing) } });
  };

  payload(key: string, replayed: boolean) {
    const c = this.charges.get(key)!;
    return {
      idempotencyKey: key,
      status: c.status,
      replayed,
      retryAfterMs: c.status === 'PROCESSING' ? 500 : null,
      expiresAt: c.status === 'PROCESSING' ? null : '2099-01-01T00:00:00Z',
      charge: c.status === 'SUCCEEDED' ? chargeOf(key, c.input, c.captured) : null,
      failure: c.status === 'FAILED' ? { code: c.failure ?? 'card_declined', message: 'The card was declined.' } : null,
      nextAction: c.status === 'PROCESSING' && c.action ? { type: 'REDIRECT', url: challengeUrl(key), expiresAt: challengeExpiresAt } : null,
    };
  }
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}
