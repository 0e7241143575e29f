// The request timeline (timeline.ts): its rows as the library tells them
// (a real Charger's send and answer events, answerEvent for the page's own
// requests), the fault the switch asked for, and what a reload keeps.
import { answerEvent, createCharger, type ChargerEvent } from '@chargeonce/client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryStorage } from './fakes';
import { answeredRow, Timeline, type RequestRecord } from './timeline';
import { faultFetch, faultHeader } from './transport';

const pending = (over: Partial<RequestRecord> = {}): RequestRecord => ({ n: 1, operation: 'chargeCard', idempotencyKey: 'k', sentAt: '', outcome: 'pending', ...over });

describe('answeredRow: an answer event, as a row', () => {
  it.each([
    [{ http: 200, status: 'SUCCEEDED' as const, replayed: true }, { outcome: 'answered', httpStatus: 200, status: 'SUCCEEDED', replayed: true }],
    [{ http: 200, status: 'PROCESSING' as const, replayed: false, nextAction: 'REDIRECT' as const }, { outcome: 'answered', status: 'PROCESSING', nextAction: 'REDIRECT' }],
    [{ http: 200, status: null }, { outcome: 'answered', status: null }],
    [{ http: 503, code: 'SERVICE_UNAVAILABLE', hintMs: 2000 }, { outcome: 'graphql-error', httpStatus: 503, detail: 'SERVICE_UNAVAILABLE', retryAfterMs: 2000 }],
    [{ reason: 'Failed to fetch' }, { outcome: 'network-error', detail: 'Failed to fetch' }],
  ])('%j', (e, want) => {
    expect(answeredRow(pending(), e)).toMatchObject(want);
  });
});

describe("the timeline of a real charger's attempt", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A charger over a scripted chargeonce, through the fault switch, its events told to a timeline. */
  function attempt(answers: ((init: RequestInit) => Response | Promise<Response>)[], dropFirst = false) {
    const timeline = new Timeline(new MemoryStorage());
    timeline.load('key-1');
    const faults: (string | null)[] = [];
    let drop = dropFirst;
    const fetch = faultFetch(
      {
        faultFor: (r) => (r.operation === 'chargeCard' && drop ? ((drop = false), 'drop-response') : null),
        faulted: (r, fault) => timeline.fault(r.operation, r.key, fault),
      },
      async (_, init) => {
        faults.push(new Headers(init?.headers).get(faultHeader));
        return answers.shift()!(init!);
      },
    );
    const c = createCharger({
      endpoint: 'http://shop.test/graphql',
      publishableKey: 'co_pk_demo',
      session: 'cs_1',
      storage: new MemoryStorage(),
      live: 'poll',
      crossTab: false,
      retry: { maxAttempts: 4, capMs: 4_000 },
      environment: { random: () => 0.5 },
      fetch,
      mintKey: () => 'key-1',
      onEvent: (e: ChargerEvent) => {
        if (e.type === 'send' || e.type === 'answer') timeline.told(e);
      },
    });
    return { timeline, c, faults };
  }

  const data = (payload: object, errors?: object[]) => new Response(JSON.stringify({ data: { chargeCard: payload }, ...(errors ? { errors } : {}) }));
  const succeeded = (replayed: boolean) => ({ idempotencyKey: 'key-1', status: 'SUCCEEDED', replayed, charge: null, failure: null, nextAction: null });
  const cut = () => new Response(new ReadableStream({ start: (c) => c.error(new TypeError('network error')) }));

  it('a lost answer: a network error on the row that asked for the fault, then the replay under the same key', async () => {
    const { timeline, c, faults } = attempt([cut, () => data(succeeded(true))], true);
    const paid = c.pay({ paymentMethod: 'pm_card_visa' });
    await vi.advanceTimersByTimeAsync(4_000);
    await expect(paid).resolves.toMatchObject({ status: 'SUCCEEDED', replayed: true });
    expect(faults).toEqual(['drop-response', null]);
    expect(timeline.all()).toMatchObject([
      { n: 1, operation: 'chargeCard', idempotencyKey: 'key-1', fault: 'drop-response', outcome: 'network-error' },
      { n: 2, operation: 'chargeCard', idempotencyKey: 'key-1', outcome: 'answered', status: 'SUCCEEDED', replayed: true },
    ]);
    expect(timeline.all()[1].fault).toBeUndefined();
    c.close();
  });

  it('a partial answer (the payload and an error) is the payload, as the charger reads it: the row and the outcome agree', async () => {
    const partial = () => data(succeeded(false), [{ message: 'a field failed', extensions: { code: 'INTERNAL_SERVER_ERROR' } }]);
    const { timeline, c } = attempt([partial]);
    await expect(c.pay({ paymentMethod: 'pm_card_visa' })).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(timeline.all()).toMatchObject([{ outcome: 'answered', status: 'SUCCEEDED', replayed: false }]);
    c.close();
  });

  it("a busy server: the row has the error's code and the wait the server asked for", async () => {
    const busy = () =>
      new Response(JSON.stringify({ errors: [{ message: 'busy', extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 } }] }), { status: 503 });
    const { timeline, c } = attempt([busy, () => data(succeeded(false))]);
    const paid = c.pay({ paymentMethod: 'pm_card_visa' });
    await vi.advanceTimersByTimeAsync(1_000);
    await paid;
    expect(timeline.all()).toMatchObject([
      { outcome: 'graphql-error', httpStatus: 503, detail: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 },
      { outcome: 'answered', status: 'SUCCEEDED' },
    ]);
    c.close();
  });
});

describe('Timeline', () => {
  it("the page's own request: its row, then its answer in the library's words", () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const row = t.request('chargeStatus', 'k1');
    t.fault('chargeStatus', 'k1', 'drop-response');
    t.answer(row, answerEvent('k1', 'chargeStatus', { kind: 'payload', payload: null, http: 200 }));
    expect(t.all()).toMatchObject([{ operation: 'chargeStatus', fault: 'drop-response', outcome: 'answered', status: null }]);
  });

  it('an answer event answers the oldest row of its operation and key still waiting', () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    t.told({ type: 'send', operation: 'chargeStatus', key: 'k1' });
    t.told({ type: 'send', operation: 'chargeStatus', key: 'k1' });
    t.told({ type: 'answer', operation: 'chargeStatus', key: 'k1', status: 'PROCESSING' });
    expect(t.all().map((r) => [r.n, r.outcome])).toEqual([
      [1, 'answered'],
      [2, 'pending'],
    ]);
  });

  it('survives a reload, marking requests whose answers were never read', () => {
    const storage = new MemoryStorage();
    const before = new Timeline(storage);
    before.load('k1');
    before.add({ operation: 'chargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'pending' });

    const after = new Timeline(storage);
    after.load('k1');
    expect(after.all()).toMatchObject([{ n: 1, outcome: 'abandoned' }]);
    after.add({ operation: 'chargeStatus', idempotencyKey: 'k1', sentAt: '', outcome: 'pending' });
    expect(after.all().map((r) => r.n)).toEqual([1, 2]);
  });

  it("starts empty for another attempt's key and lists each key once", () => {
    const storage = new MemoryStorage();
    const t = new Timeline(storage);
    t.load('k1');
    t.add({ operation: 'chargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'network-error' });
    t.add({ operation: 'chargeCard', idempotencyKey: 'k2', sentAt: '', outcome: 'answered' });
    t.add({ operation: 'chargeStatus', idempotencyKey: 'k2', sentAt: '', outcome: 'answered' });
    expect(t.keys()).toEqual(['k1', 'k2']);

    const other = new Timeline(storage);
    other.load('k9');
    expect(other.all()).toEqual([]);
  });

  it("an act's id is not one of the charge's keys: the ledger and unsafe mode count charge keys only", () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    t.add({ operation: 'chargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'answered' });
    t.add({ operation: 'refundCharge', idempotencyKey: 'rf-1', sentAt: '', outcome: 'answered' });
    t.add({ operation: 'captureCharge', idempotencyKey: 'cap-1', sentAt: '', outcome: 'answered' });
    t.add({ operation: 'voidCharge', idempotencyKey: 'v-1', sentAt: '', outcome: 'answered' });
    expect(t.keys()).toEqual(['k1']);
  });

  it('the page goes to the bank: pending requests are marked with why, and stay so whatever answers meanwhile', () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    t.add({ operation: 'chargeCard', idempotencyKey: 'k1', sentAt: '', outcome: 'answered', status: 'PROCESSING' });
    const live = t.add({ operation: 'chargeUpdated', idempotencyKey: 'k1', sentAt: '', outcome: 'pending' });
    const asked = t.request('chargeStatus', 'k1');
    t.abandonPending('the page went to the bank');
    t.update({ ...live, outcome: 'unavailable', detail: 'closed 1001' });
    t.answer(asked, { reason: 'Failed to fetch' });
    expect(t.all().map((r) => [r.outcome, r.detail])).toEqual([
      ['answered', undefined],
      ['abandoned', 'the page went to the bank'],
      ['abandoned', 'the page went to the bank'],
    ]);
  });

  it('a request the page cuts as it goes away (a reload) was abandoned, not lost by the network', () => {
    const t = new Timeline(new MemoryStorage());
    t.load('k1');
    const row = t.request('chargeCard', 'k1');
    t.leaving = 'the page was reloaded';
    t.answer(row, { reason: 'Failed to fetch' });
    expect(t.all()).toMatchObject([{ outcome: 'abandoned', detail: 'the page was reloaded' }]);
  });
});
