import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './fakes';
import { Timeline } from './timeline';
import { captureAct, voidAct } from './backend';
import { operationNames } from './rowtext';
import { faultHeader, recordingFetch, refundOperation, type TransportHooks } from './transport';

function hooksFor(timeline: Timeline, fault: string | null = null): TransportHooks {
  return { faultFor: () => fault, sent: (r) => timeline.add(r), update: (r) => timeline.update(r) };
}

const request = (key: string) => ({
  method: 'POST',
  body: JSON.stringify({ operationName: 'ChargeCard', query: 'mutation…', variables: { idempotencyKey: key } }),
});

const answer = (data: unknown) => new Response(JSON.stringify(data), { headers: { 'Content-Type': 'application/json' } });

describe('recordingFetch', () => {
  it('records an answered request with its key, status and replayed', async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const f = recordingFetch(hooksFor(t), async () => answer({ data: { chargeCard: { status: 'SUCCEEDED', replayed: true } } }));
    const res = await f('/graphql', request('k1'));
    expect(await res.json()).toEqual({ data: { chargeCard: { status: 'SUCCEEDED', replayed: true } } });
    expect(t.all()).toMatchObject([
      { n: 1, operation: 'ChargeCard', idempotencyKey: 'k1', outcome: 'answered', status: 'SUCCEEDED', replayed: true, httpStatus: 200 },
    ]);
  });

  it("records the checkout session a request names: chargeCard's input, or chargeStatus's argument", async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const f = recordingFetch(hooksFor(t), async () => answer({ data: { chargeCard: { status: 'SUCCEEDED', replayed: false } } }));
    const variables = { idempotencyKey: 'k1', input: { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_1' } };
    await f('/graphql', { method: 'POST', body: JSON.stringify({ operationName: 'ChargeCard', variables }) });
    await f('/graphql', {
      method: 'POST',
      body: JSON.stringify({ operationName: 'SessionChargeStatus', variables: { idempotencyKey: 'k1', checkoutSession: 'cs_1' } }),
    });
    await f('/graphql', request('k1'));
    expect(t.all().map((r) => r.checkoutSession)).toEqual(['cs_1', 'cs_1', undefined]);
  });

  it('adds the fault header when asked, and records a cut body as a network error', async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    let sentFault: string | null = null;
    const cut = async (_: RequestInfo | URL, init?: RequestInit) => {
      sentFault = new Headers(init?.headers).get(faultHeader);
      const body = new ReadableStream({
        start(c) {
          c.error(new TypeError('network error'));
        },
      });
      return new Response(body, { status: 200 });
    };
    const f = recordingFetch(hooksFor(t, 'drop-response'), cut);
    await expect(f('/graphql', request('k1'))).rejects.toThrow(TypeError);
    expect(sentFault).toBe('drop-response');
    expect(t.all()).toMatchObject([{ n: 1, fault: 'drop-response', outcome: 'network-error' }]);
  });

  it("records a PROCESSING answer's nextAction: the bank asks the shopper to authenticate", async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const nextAction = { type: 'REDIRECT', url: 'http://127.0.0.1/provider/authenticate/ch_1', expiresAt: '2099-01-01T00:00:00Z' };
    const f = recordingFetch(hooksFor(t), async () => answer({ data: { chargeCard: { status: 'PROCESSING', replayed: false, nextAction } } }));
    await f('/graphql', request('k1'));
    expect(t.all()[0]).toMatchObject({ outcome: 'answered', status: 'PROCESSING', nextAction: 'REDIRECT' });
  });

  it('records a GraphQL error by its code', async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const f = recordingFetch(hooksFor(t), async () =>
      answer({ errors: [{ message: 'reused', extensions: { code: 'IDEMPOTENCY_KEY_REUSED' } }] }),
    );
    await f('/graphql', request('k1'));
    expect(t.all()[0]).toMatchObject({ outcome: 'graphql-error', detail: 'IDEMPOTENCY_KEY_REUSED' });
    expect(t.all()[0].retryAfterMs).toBeUndefined();
  });

  it.each([
    [503, 'SERVICE_UNAVAILABLE'],
    [429, 'RATE_LIMITED'],
  ])('records HTTP %i %s with its code and retry hint, and hands the status on', async (status, code) => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const body = { errors: [{ message: 'busy', extensions: { code, retryAfterMs: 1000 } }] };
    const f = recordingFetch(hooksFor(t), async () =>
      new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', 'Retry-After': '1' } }),
    );
    const res = await f('/graphql', request('k1'));
    expect(res.status).toBe(status);
    expect(res.headers.get('Retry-After')).toBe('1');
    expect(await res.json()).toEqual(body);
    expect(t.all()[0]).toMatchObject({ outcome: 'graphql-error', httpStatus: status, detail: code, retryAfterMs: 1000 });
  });
});

describe('recordingFetch: the refund, through the shop backend', () => {
  const refundRequest = (refundId: string) => ({ method: 'POST', body: JSON.stringify({ refundId, chargeId: 'c1' }) });

  it('records it as RefundCharge under the refund id, with its status and replayed, and asks for the fault', async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    let sentFault: string | null = null;
    const f = recordingFetch(hooksFor(t, 'drop-response'), async (_, init) => {
      sentFault = new Headers(init?.headers).get(faultHeader);
      return answer({ status: 'SUCCEEDED', replayed: true, refund: { id: 'r1' } });
    });
    await f('/demo/refund', refundRequest('rf-1'));
    expect(sentFault).toBe('drop-response');
    expect(t.all()).toMatchObject([
      { n: 1, operation: refundOperation, idempotencyKey: 'rf-1', outcome: 'answered', status: 'SUCCEEDED', replayed: true, fault: 'drop-response' },
    ]);
  });

  it("records the backend's refusal by its code", async () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const f = recordingFetch(hooksFor(t), async () =>
      new Response(JSON.stringify({ error: { code: 'REFUND_EXCEEDS_CHARGE', message: 'nothing remains', refundable: 0 } }), { status: 409 }),
    );
    const res = await f('/demo/refund', refundRequest('rf-1'));
    expect(res.status).toBe(409);
    expect(t.all()[0]).toMatchObject({ operation: refundOperation, outcome: 'graphql-error', httpStatus: 409, detail: 'REFUND_EXCEEDS_CHARGE' });
  });

  it("an act's id is not one of the charge's keys: the ledger and unsafe mode count charge keys only", () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    t.add({ operation: 'ChargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'answered' });
    t.add({ operation: refundOperation, idempotencyKey: 'rf-1', sentAt: '', outcome: 'answered' });
    t.add({ operation: captureAct.operation, idempotencyKey: 'cap-1', sentAt: '', outcome: 'answered' });
    t.add({ operation: voidAct.operation, idempotencyKey: 'v-1', sentAt: '', outcome: 'answered' });
    expect(t.keys()).toEqual(['k1']);
  });
});

describe('recordingFetch: Ship order and Cancel order, through the shop backend', () => {
  it.each([
    [captureAct, { captureId: 'cap-1', chargeId: 'c1' }, 'cap-1'],
    [voidAct, { voidId: 'v-1', chargeId: 'c1' }, 'v-1'],
  ])('$operation: recorded under the page\'s id for it, with its status and replayed, and asked for the fault', async (act, body, id) => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const asked: string[] = [];
    const f = recordingFetch(
      { faultFor: (op) => (asked.push(op), 'drop-response'), sent: (r) => t.add(r), update: (r) => t.update(r) },
      async () => answer({ status: 'SUCCEEDED', replayed: true }),
    );
    await f(act.path, { method: 'POST', body: JSON.stringify(body) });
    expect(asked).toEqual([act.operation]);
    expect(t.all()).toMatchObject([{ n: 1, operation: act.operation, idempotencyKey: id, outcome: 'answered', status: 'SUCCEEDED', replayed: true, fault: 'drop-response' }]);
    expect(operationNames[act.operation]).toBe(act.field);
  });
});

describe('Timeline', () => {
  it('survives a reload, marking requests whose answers were never read', () => {
    const storage = new MemoryStorage();
    const before = new Timeline(storage);
    before.load('k1');
    before.add({ operation: 'ChargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'pending' });

    const after = new Timeline(storage);
    after.load('k1');
    expect(after.all()).toMatchObject([{ n: 1, outcome: 'abandoned' }]);
    after.add({ operation: 'SessionChargeStatus', idempotencyKey: 'k1', sentAt: '', outcome: 'pending' });
    expect(after.all().map((r) => r.n)).toEqual([1, 2]);
  });

  it("starts empty for another attempt's key and lists each key once", () => {
    const storage = new MemoryStorage();
    const t = new Timeline(storage);
    t.load('k1');
    t.add({ operation: 'ChargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'network-error' });
    t.add({ operation: 'ChargeCard', idempotencyKey: 'k2', sentAt: '', outcome: 'answered' });
    t.add({ operation: 'SessionChargeStatus', idempotencyKey: 'k2', sentAt: '', outcome: 'answered' });
    expect(t.keys()).toEqual(['k1', 'k2']);

    const other = new Timeline(storage);
    other.load('k9');
    expect(other.all()).toEqual([]);
  });

  it('the page goes to the bank: pending requests are marked with why, and stay so whatever answers meanwhile', () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    t.add({ operation: 'ChargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'answered', status: 'PROCESSING' });
    const live = t.add({ operation: 'ChargeUpdated', idempotencyKey: 'k1', sentAt: '', outcome: 'pending' });
    t.abandonPending('the page went to the bank');
    t.update({ ...live, outcome: 'unavailable', detail: 'closed 1001' });
    expect(t.all().map((r) => [r.outcome, r.detail])).toEqual([
      ['answered', undefined],
      ['abandoned', 'the page went to the bank'],
    ]);
  });
});
