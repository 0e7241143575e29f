// A chargeonce in memory for the merchant's operations: refundCharge,
// captureCharge and voidCharge do each key at most once and replay it,
// their status queries answer what a key did (null for a key never seen),
// createCheckoutSession replays its session. A script says what each next
// mutation meets; the store can be checked at the moment a request leaves.
import { json } from './fakes.js';

type Field = 'refundCharge' | 'captureCharge' | 'voidCharge' | 'createCheckoutSession';

/**
 * ok: done at once. processing: PROCESSING until finish(). lose-after: done,
 * then the answer is lost. network: lost before it arrives (nothing done).
 * decline: FAILED. An object: that GraphQL error, nothing done.
 */
export type Step = 'ok' | 'processing' | 'lose-after' | 'network' | 'decline' | { code: string; http?: number; retryAfterMs?: number; field?: string; more?: Record<string, unknown> };

type Fault = Extract<Step, 'network' | object>;

interface Done {
  field: Field;
  input: unknown;
  status: 'PROCESSING' | 'SUCCEEDED' | 'FAILED';
}

export interface Sent {
  operationName: string;
  key: string;
  input?: Record<string, unknown>;
  headers: Headers;
}

const mutations: Record<string, Field> = {
  RefundCharge: 'refundCharge',
  CaptureCharge: 'captureCharge',
  VoidCharge: 'voidCharge',
  CreateCheckoutSession: 'createCheckoutSession',
};
const statuses: Record<string, Field> = { RefundStatus: 'refundCharge', CaptureStatusOfKey: 'captureCharge', VoidStatusOfKey: 'voidCharge' };

export class FakeMerchantServer {
  readonly sent: Sent[] = [];
  readonly done = new Map<string, Done>();
  script: Step[] = [];
  /** What each status query meets: 'ok' (the default) answers, a fault as for a mutation. */
  statusScript: ('ok' | Fault)[] = [];
  /** Called as each request leaves, before it is answered. */
  onSend: ((s: Sent) => void | Promise<void>) | null = null;
  retryAfterMs = 500;
  expiresAt: string | null = '2099-01-01T00:00:00Z';

  /** The requests of one operation. */
  named(operationName: string): Sent[] {
    return this.sent.filter((s) => s.operationName === operationName);
  }

  /** The provider's final word on a PROCESSING key. */
  finish(key: string, status: 'SUCCEEDED' | 'FAILED' = 'SUCCEEDED') {
    const d = this.done.get(key);
    if (d) d.status = status;
  }

  readonly fetch: typeof fetch = async (_url, init) => {
    const body = JSON.parse(String(init?.body)) as { operationName: string; variables: { idempotencyKey: string; input?: Record<string, unknown> } };
    const s: Sent = { operationName: body.operationName, key: body.variables.idempotencyKey, headers: new Headers(init?.headers) };
    if (body.variables.input) s.input = body.variables.input;
    this.sent.push(s);
    await this.onSend?.(s);
    const status = statuses[body.operationName];
    if (status) {
      const step = this.statusScript.shift() ?? 'ok';
      if (step !== 'ok') return this.fault(step);
      const d = this.done.get(s.key);
      return json({ data: { [`${status.replace('Charge', '')}Status`]: d && d.field === status ? this.payload(s.key, d, true) : null } });
    }
    const field = mutations[body.operationName];
    if (!field) return json({ errors: [{ message: 'unknown operation', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] });
    const step = this.script.shift() ?? 'ok';
    if (step === 'network' || typeof step === 'object') return this.fault(step);
    const existing = this.done.get(s.key);
    let replayed = false;
    if (existing) {
      if (JSON.stringify(existing.input) !== JSON.stringify(s.input)) {
        return json({ errors: [{ message: 'reused', extensions: { code: 'IDEMPOTENCY_KEY_REUSED', field: 'idempotencyKey' } }] });
      }
      replayed = true;
    } else {
      this.done.set(s.key, { field, input: s.input, status: step === 'processing' ? 'PROCESSING' : step === 'decline' ? 'FAILED' : 'SUCCEEDED' });
    }
    if (step === 'lose-after') throw new TypeError('terminated');
    return json({ data: { [field]: this.payload(s.key, this.done.get(s.key)!, replayed) } });
  };

  private fault(step: Fault): Response {
    if (step === 'network') throw new TypeError('fetch failed');
    return json(
      { errors: [{ message: step.code, extensions: { code: step.code, ...step.more, ...(step.field && { field: step.field }), ...(step.retryAfterMs !== undefined && { retryAfterMs: step.retryAfterMs }) } }] },
      step.http ?? 200,
    );
  }

  payload(key: string, d: Done, replayed: boolean) {
    const input = d.input as { chargeId?: string; amount?: number };
    const chargeId = input.chargeId ?? 'ch_1';
    if (d.field === 'createCheckoutSession') {
      return {
        idempotencyKey: key,
        replayed,
        session: { id: `cs_${key}`, clientSecret: `cs_${key}_secret`, status: 'OPEN', amount: input.amount ?? 2500, currency: 'USD', orderId: null, description: null, returnUrl: null, createdAt: '2026-01-01T00:00:00Z', expiresAt: '2026-01-01T01:00:00Z', attempts: 0, maxAttempts: 5 },
      };
    }
    const final = d.status !== 'PROCESSING';
    const base = {
      idempotencyKey: key,
      status: d.status,
      replayed,
      retryAfterMs: final ? null : this.retryAfterMs,
      expiresAt: final ? this.expiresAt : null,
      failure: d.status === 'FAILED' ? { code: 'card_declined', message: 'The card was declined.' } : null,
    };
    const ok = d.status === 'SUCCEEDED';
    const charge = { id: chargeId, amount: 2500, currency: 'USD', orderId: null, providerChargeId: `p_${chargeId}`, createdAt: '2026-01-01T00:00:00Z', captureStatus: 'CAPTURED', amountCaptured: 2500, amountCapturable: 0, authorizationExpiresAt: null };
    if (d.field === 'refundCharge') {
      return { ...base, refund: ok ? { id: `re_${key}`, chargeId, amount: input.amount ?? 2500, currency: 'USD', reason: null, providerRefundId: `pre_${key}`, status: 'SUCCEEDED', createdAt: '2026-01-01T00:00:00Z' } : null };
    }
    if (d.field === 'captureCharge') {
      return { ...base, capture: ok ? { id: `cp_${key}`, chargeId, amount: input.amount ?? 2500, final: true, createdAt: '2026-01-01T00:00:00Z' } : null, charge };
    }
    return { ...base, void: ok ? { id: `vd_${key}`, chargeId, createdAt: '2026-01-01T00:00:00Z' } : null, charge: { ...charge, captureStatus: 'VOIDED', amountCaptured: 0 } };
  }
}
