import { describe, expect, it, vi } from 'vitest';
import { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from '../src/errors.js';
import type { ChargerState } from '../src/types.js';
import { chargersPerTest, FakeServer, FakeWindow, MemoryStorage } from './fakes.js';

const card = { paymentMethod: 'pm_card_visa' };
const make = chargersPerTest();

describe('createCharger against a fake chargeonce', () => {
  it('sends the publishable key, the session and the key; resolves SUCCEEDED', async () => {
    const server = new FakeServer();
    const { c, states } = make(server);
    const outcome = await c.pay(card);
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: false });
    const [req] = server.requests;
    expect(req!.headers.get('Authorization')).toBe('Bearer co_pk_test');
    expect(req!.headers.get('Content-Type')).toBe('application/json');
    expect(req!.variables).toEqual({ idempotencyKey: 'key-1', input: { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_test_secret' } });
    expect(states.map((s) => s.kind)).toEqual(['sending', 'settled']);
  });

  it('sends the page\'s trace context on every request, and refuses a malformed one before sending', async () => {
    const server = new FakeServer();
    server.script = ['lose-after-charge'];
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const { c } = make(server, { traceparent, tracestate: 'shop=1' });
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(1_000);
    await p;
    expect(server.chargeCards).toHaveLength(2);
    for (const r of server.requests) {
      expect(r.headers.get('traceparent')).toBe(traceparent);
      expect(r.headers.get('tracestate')).toBe('shop=1');
    }
    for (const bad of ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7', 'not a trace', '00-00000000000000000000000000000000-00f067aa0ba902b7-01']) {
      expect(() => make(server, { traceparent: bad })).toThrow(TypeError);
    }
    expect(server.chargeCards).toHaveLength(2);
  });

  it('sends no trace context unless the page gives one', async () => {
    const server = new FakeServer();
    const { c } = make(server);
    await c.pay(card);
    expect(server.requests[0]!.headers.has('traceparent')).toBe(false);
  });

  it('a lost response after the server charged is retried with the same key and replayed: one charge', async () => {
    const server = new FakeServer();
    server.script = ['lose-after-charge'];
    const { c, events, mintKey } = make(server);
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(1_000);
    const outcome = await p;
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: true, key: 'key-1' });
    expect(server.chargeCards.map((r) => r.variables.idempotencyKey)).toEqual(['key-1', 'key-1']);
    expect(server.charges.size).toBe(1);
    expect(mintKey).toHaveBeenCalledTimes(1);
    expect(events.find((e) => e.type === 'retry')).toMatchObject({ cause: 'network', waitMs: 50, try: 2 });
  });

  it('every send has its answer event, as the charger read the answer', async () => {
    const server = new FakeServer();
    server.script = ['lose-after-charge', { code: 'SERVICE_UNAVAILABLE', http: 503, retryAfterMs: 300 }];
    const { c, events } = make(server);
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED', replayed: true });
    const wire = events.filter((e) => e.type === 'send' || e.type === 'answer');
    expect(wire).toEqual([
      { type: 'send', key: 'key-1', try: 1, operation: 'chargeCard' },
      { type: 'answer', key: 'key-1', operation: 'chargeCard', reason: expect.any(String) },
      { type: 'send', key: 'key-1', try: 2, operation: 'chargeCard' },
      { type: 'answer', key: 'key-1', operation: 'chargeCard', http: 503, code: 'SERVICE_UNAVAILABLE', hintMs: 300 },
      { type: 'send', key: 'key-1', try: 3, operation: 'chargeCard' },
      { type: 'answer', key: 'key-1', operation: 'chargeCard', http: 200, status: 'SUCCEEDED', replayed: true },
    ]);
  });

  it("a question asked again before the first one's answer: both answers are told, the latest moves the state", async () => {
    const server = new FakeServer();
    server.script = ['processing'];
    const win = new FakeWindow();
    const { c, events } = make(server, {
      environment: { random: () => 0.5, addEventListener: win.addEventListener, removeEventListener: win.removeEventListener, onLine: () => true },
    });
    const p = c.pay(card);
    await vi.dynamicImportSettled(); // the page events load apart, before the first send
    await vi.advanceTimersByTimeAsync(0);
    expect(c.state.kind).toBe('following');
    let open!: () => void;
    server.gate = new Promise((r) => (open = r));
    await vi.advanceTimersByTimeAsync(500); // the server's pace: the first chargeStatus, held
    expect(server.statusChecks).toHaveLength(1);
    win.fire('online'); // asks again at once
    expect(server.statusChecks).toHaveLength(2);
    server.finish('key-1');
    open();
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
    const asked = events.filter((e) => (e.type === 'send' || e.type === 'answer') && e.operation === 'chargeStatus').map((e) => e.type);
    expect(asked).toEqual(['send', 'send', 'answer', 'answer']);
    expect(c.state.kind).toBe('settled');
  });

  it('a proxy\'s HTML 502 and SERVICE_UNAVAILABLE are retried; the hint is waited for', async () => {
    const server = new FakeServer();
    server.script = ['html-502', { code: 'SERVICE_UNAVAILABLE', http: 503, retryAfterMs: 1_500 }];
    const { c, events } = make(server);
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(60); // the first backoff: 0.5 × 100
    expect(server.chargeCards).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1_400);
    expect(server.chargeCards).toHaveLength(2); // the server asked for 1.5 s
    await vi.advanceTimersByTimeAsync(200);
    expect(server.chargeCards).toHaveLength(3);
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(events.filter((e) => e.type === 'retry').map((e) => (e as { cause: string }).cause)).toEqual(['network', 'SERVICE_UNAVAILABLE']);
  });

  it('RATE_LIMITED with only Retry-After: 2 waits two seconds, not two milliseconds', async () => {
    const server = new FakeServer();
    server.script = [{ code: 'RATE_LIMITED', http: 429, retryAfter: '2' }];
    const { c } = make(server, { retry: { capMs: 5_000 } });
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(1_990);
    expect(server.chargeCards).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(20);
    expect(server.chargeCards).toHaveLength(2);
    await p;
  });

  it('a double click sends one request and returns the same promise', async () => {
    const server = new FakeServer();
    let open!: () => void;
    server.gate = new Promise((r) => (open = r));
    const { c, mintKey } = make(server);
    const a = c.pay(card);
    const b = c.pay({ ...card });
    expect(b).toBe(a);
    await vi.advanceTimersByTimeAsync(0);
    open();
    await a;
    expect(server.chargeCards).toHaveLength(1);
    expect(mintKey).toHaveBeenCalledTimes(1);
  });

  it('pay() with another input while an attempt is open rejects with AttemptOpenError naming the key', async () => {
    const server = new FakeServer();
    let open!: () => void;
    server.gate = new Promise((r) => (open = r));
    const { c, mintKey } = make(server);
    const a = c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    const err = await c.pay({ paymentMethod: 'pm_card_mastercard' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttemptOpenError);
    expect((err as AttemptOpenError).key).toBe('key-1');
    expect(mintKey).toHaveBeenCalledTimes(1);
    open();
    await a;
  });

  it('abort rejects with AbortError and stops waiting, never the attempt; resume() finishes it', async () => {
    const server = new FakeServer();
    server.script = ['network', 'network'];
    const { c } = make(server);
    const ctl = new AbortController();
    const p = c.pay(card, { signal: ctl.signal });
    await vi.advanceTimersByTimeAsync(0);
    ctl.abort();
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect((err as AbortError).name).toBe('AbortError');
    expect((err as AbortError).key).toBe('key-1');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(c.state.kind).toBe('settled');
    await expect(c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(new Set(server.chargeCards.map((r) => r.variables.idempotencyKey))).toEqual(new Set(['key-1']));
  });

  it('an already aborted signal rejects at once', async () => {
    const { c } = make(new FakeServer());
    await expect(c.pay(card, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(AbortError);
  });

  it('a reload (a new charger on the same storage) resumes with the same key and input', async () => {
    const server = new FakeServer();
    const storage = new MemoryStorage();
    server.script = ['lose-after-charge', 'network', 'network', 'network', 'network'];
    const first = make(server, { storage });
    const lost = first.c.pay(card).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(5);
    first.c.close(); // the page goes away mid-retry
    expect(await lost).toBeInstanceOf(AbortError);
    server.script = [];

    const second = make(server, { storage });
    const outcome = await second.c.resume();
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true });
    expect(second.mintKey).not.toHaveBeenCalled();
    const resent = server.chargeCards.at(-1)!;
    expect(resent.variables).toEqual(server.chargeCards[0]!.variables);
    expect(server.charges.size).toBe(1);
  });

  it('after a reload, pay() with the same input resumes the open attempt; another input is refused', async () => {
    const server = new FakeServer();
    const storage = new MemoryStorage();
    server.script = ['network', 'network', 'network', 'network', 'network'];
    const first = make(server, { storage });
    const p = first.c.pay(card).catch(() => {});
    await vi.advanceTimersByTimeAsync(5);
    first.c.close();
    await p;
    server.script = [];

    const second = make(server, { storage });
    await expect(second.c.pay({ paymentMethod: 'pm_card_mastercard' })).rejects.toMatchObject({ name: 'AttemptOpenError', key: 'key-1' });
    await expect(second.c.pay(card)).resolves.toMatchObject({ key: 'key-1' });
    expect(second.mintKey).not.toHaveBeenCalled();
  });

  it('the budget spent without an answer is unknown: UnknownOutcomeError, reset() refused, resume() the same key', async () => {
    const server = new FakeServer();
    server.script = Array(5).fill('network');
    const { c, events, mintKey } = make(server);
    const p = c.pay(card).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(10_000);
    const err = await p;
    expect(err).toBeInstanceOf(UnknownOutcomeError);
    expect((err as UnknownOutcomeError).key).toBe('key-1');
    expect(c.state.kind).toBe('unknown');
    expect(server.chargeCards).toHaveLength(5);
    expect(events.some((e) => e.type === 'unknown')).toBe(true);
    expect(() => c.reset()).toThrow(ChargerStateError);
    await expect(c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(mintKey).toHaveBeenCalledTimes(1);
  });

  it('BAD_USER_INPUT rejects with ChargeRejectedError, never retried; reset() then a new key', async () => {
    const server = new FakeServer();
    server.script = [{ code: 'BAD_USER_INPUT' }];
    const { c } = make(server);
    const err = await c.pay(card).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChargeRejectedError);
    expect(err).toMatchObject({ code: 'BAD_USER_INPUT', key: 'key-1' });
    expect(server.chargeCards).toHaveLength(1);
    expect(c.state.kind).toBe('rejected');
    await expect(c.pay({ paymentMethod: 'pm_other' })).rejects.toBeInstanceOf(ChargerStateError);
    c.reset();
    await expect(c.pay({ paymentMethod: 'pm_other' })).resolves.toMatchObject({ key: 'key-2' });
  });

  it('a decline is an outcome; reset() then the next attempt gets a new key', async () => {
    const server = new FakeServer();
    server.decline = true;
    const { c } = make(server);
    await expect(c.pay(card)).resolves.toMatchObject({ status: 'FAILED', failure: { code: 'card_declined' } });
    await expect(c.pay(card)).resolves.toMatchObject({ status: 'FAILED', key: 'key-1' }); // no new request
    expect(server.chargeCards).toHaveLength(1);
    c.reset();
    server.decline = false;
    await expect(c.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-2' });
  });

  it('PROCESSING is polled with chargeStatus (with the session), never resent', async () => {
    const server = new FakeServer();
    server.script = ['processing'];
    const { c, states } = make(server);
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    expect(c.state).toMatchObject({ kind: 'following', live: 'poll' });
    await vi.advanceTimersByTimeAsync(500);
    const status = server.requests.filter((r) => r.operationName === 'ChargeStatus');
    expect(status).toHaveLength(1);
    expect(status[0]!.variables).toEqual({ idempotencyKey: 'key-1', checkoutSession: 'cs_test_secret' });
    server.finish('key-1');
    await vi.advanceTimersByTimeAsync(500);
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(server.chargeCards).toHaveLength(1);
    expect(states.some((s) => s.kind === 'following')).toBe(true);
  });

  it('offline pauses the retries; online sends at once', async () => {
    const server = new FakeServer();
    server.script = ['network'];
    const win = new FakeWindow();
    const { c, events } = make(server, {
      environment: { random: () => 0.5, addEventListener: win.addEventListener, removeEventListener: win.removeEventListener, onLine: () => win.onLine },
    });
    const p = c.pay(card);
    await vi.dynamicImportSettled(); // the page events load apart, before the first send
    await vi.advanceTimersByTimeAsync(0);
    expect(c.state.kind).toBe('retrying');
    win.onLine = false;
    win.fire('offline');
    expect(c.state).toMatchObject({ kind: 'retrying', paused: true, flags: { offline: true } });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(server.chargeCards).toHaveLength(1);
    expect(c.state).toMatchObject({ kind: 'retrying', paused: true }); // never fails while offline
    win.onLine = true;
    win.fire('online');
    expect(server.chargeCards).toHaveLength(2);
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['pause', 'unpause']));
  });

  it('a charger created offline pauses after the first failure instead of spending its budget', async () => {
    const server = new FakeServer();
    server.script = ['network'];
    const win = new FakeWindow();
    win.onLine = false;
    const { c } = make(server, { environment: { addEventListener: win.addEventListener, removeEventListener: win.removeEventListener, onLine: () => win.onLine } });
    void c.pay(card).catch(() => {});
    await vi.dynamicImportSettled(); // the page events load apart, before the first send
    await vi.advanceTimersByTimeAsync(0);
    expect(c.state).toMatchObject({ kind: 'retrying', paused: true, flags: { offline: true } });
  });

  it('pageshow from the back/forward cache re-checks at once', async () => {
    const server = new FakeServer();
    server.script = ['network'];
    const win = new FakeWindow();
    const { c } = make(server, { retry: { baseMs: 5_000, capMs: 5_000 }, environment: { random: () => 0.9, addEventListener: win.addEventListener, removeEventListener: win.removeEventListener } });
    const p = c.pay(card);
    await vi.dynamicImportSettled(); // the page events load apart, before the first send
    await vi.advanceTimersByTimeAsync(0);
    expect(c.state.kind).toBe('retrying');
    win.fire('pageshow', { persisted: true });
    expect(server.chargeCards).toHaveLength(2);
    await p;
  });

  it('close() removes its listeners and rejects waiters with AbortError', async () => {
    const server = new FakeServer();
    server.gate = new Promise(() => {});
    const win = new FakeWindow();
    const { c } = make(server, { environment: { addEventListener: win.addEventListener, removeEventListener: win.removeEventListener } });
    expect(win.listeners('online')).toBe(0); // the page events load apart
    await vi.dynamicImportSettled();
    expect(win.listeners('online')).toBe(1);
    const p = c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    c.close();
    await expect(p).rejects.toBeInstanceOf(AbortError);
    expect(win.listeners('online')).toBe(0);
  });

  it('a charger closed before the page events loaded adds no listener', async () => {
    const server = new FakeServer();
    const win = new FakeWindow();
    const { c } = make(server, { environment: { addEventListener: win.addEventListener, removeEventListener: win.removeEventListener } });
    c.close();
    await vi.dynamicImportSettled();
    for (const t of ['online', 'offline', 'visibilitychange', 'pageshow']) expect(win.listeners(t)).toBe(0);
    expect(server.requests).toHaveLength(0);
  });

  it('server to server: headers instead of a publishable key, the terms in the input', async () => {
    const server = new FakeServer();
    const { c } = make(server, { publishableKey: undefined, session: undefined, headers: { Authorization: 'Bearer co_sk_x' } });
    await c.pay({ paymentMethod: 'pm', amount: 1999, currency: 'USD', orderId: 'o-1' });
    expect(server.requests[0]!.headers.get('Authorization')).toBe('Bearer co_sk_x');
    expect(server.requests[0]!.variables.input).toEqual({ paymentMethod: 'pm', amount: 1999, currency: 'USD', orderId: 'o-1' });
  });

  it('the record is persisted before the first byte is sent', async () => {
    const storage = new MemoryStorage();
    const server = new FakeServer();
    let seen: string | undefined;
    const { c } = make(server, {
      storage,
      fetch: async (u, i) => {
        seen = [...storage.map.values()][0];
        return server.fetch(u, i);
      },
    });
    await c.pay(card);
    expect(JSON.parse(seen!)).toMatchObject({ key: 'key-1', status: 'open', scope: 'cs_test_secret', input: { paymentMethod: 'pm_card_visa' } });
    expect(JSON.parse([...storage.map.values()][0]!)).toMatchObject({ status: 'settled', expiresAt: '2099-01-01T00:00:00Z' });
  });

  it('without mintKey a new key is crypto.randomUUID(); without randomUUID (outside a secure context) pay() rejects before anything is stored or sent', async () => {
    const server = new FakeServer();
    const { c } = make(server, { mintKey: undefined });
    const outcome = await c.pay(card);
    expect(outcome.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    vi.stubGlobal('crypto', { getRandomValues: (b: Uint8Array) => b });
    const storage = new MemoryStorage();
    const insecure = make(server, { mintKey: undefined, storage, session: 'cs_other' });
    await expect(insecure.c.pay(card)).rejects.toThrow('crypto.randomUUID is missing (a page outside a secure context?): pass mintKey to createCharger');
    expect(storage.map.size).toBe(0);
    expect(server.chargeCards).toHaveLength(1);
  });
});
