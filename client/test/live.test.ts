import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCharger } from '../src/charger.js';
import type { ChargerEvent } from '../src/events.js';
import { open as openSse } from '../src/sse.js';
import type { LiveOptions } from '../src/stream.js';
import { open as openWs, websocketUrl } from '../src/ws.js';
import type { ChargePayload, ChargerState } from '../src/types.js';
import { FakeServer, MemoryStorage, json } from './fakes.js';

/** The key of the charger's attempt ('' while idle). */
const keyOf = (s: ChargerState) => (s.kind === 'idle' ? '' : s.attempt.key);

const processing: ChargePayload = { idempotencyKey: 'k', status: 'PROCESSING', replayed: false, retryAfterMs: 500 };
const succeeded: ChargePayload = {
  idempotencyKey: 'k',
  status: 'SUCCEEDED',
  replayed: false,
  charge: { id: 'c', amount: 1, currency: 'USD', providerChargeId: 'p', createdAt: 'x', captureStatus: 'CAPTURED', amountCaptured: 1, amountCapturable: 0, authorizationExpiresAt: null },
};

/** An event stream as chargeonce writes it: push() adds text, end() closes it. */
function stream() {
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({ start: (c) => void (ctl = c) });
  const enc = new TextEncoder();
  return {
    response: new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } }),
    push: (s: string) => ctl.enqueue(enc.encode(s)),
    next: (p: ChargePayload) => ctl.enqueue(enc.encode(`event: next\ndata: ${JSON.stringify({ data: { chargeUpdated: p } })}\n\n`)),
    end: () => ctl.close(),
  };
}

const opts = (fetch: typeof globalThis.fetch): LiveOptions => ({
  fetch,
  endpoint: 'https://api.example/graphql',
  headers: { Authorization: 'Bearer co_pk_1' },
  authorization: 'Bearer co_pk_1',
  variables: { idempotencyKey: 'k', checkoutSession: 'cs_1' },
});

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('server-sent events', () => {
  it('POSTs the subscription with Accept: text/event-stream and reads next events, split anywhere', async () => {
    const s = stream();
    let init: RequestInit | undefined;
    const got: ChargePayload[] = [];
    const failed = vi.fn();
    openSse(
      opts(async (_u, i) => {
        init = i;
        return s.response;
      }),
      { next: (p) => got.push(p), failed },
    );
    await tick();
    const frame = `event: next\ndata: ${JSON.stringify({ data: { chargeUpdated: processing } })}\n\n`;
    s.push(': keep-alive\n\n');
    s.push(frame.slice(0, 17));
    s.push(frame.slice(17));
    s.next(succeeded);
    s.push('event: complete\n\n');
    await tick();
    expect(got.map((p) => p.status)).toEqual(['PROCESSING', 'SUCCEEDED']);
    expect(failed).not.toHaveBeenCalled();
    const h = new Headers(init?.headers);
    expect(h.get('Accept')).toBe('text/event-stream');
    expect(init?.method).toBe('POST');
    const body = JSON.parse(String(init?.body)) as { query: string; variables: unknown };
    expect(body.query).toContain('chargeUpdated(idempotencyKey:$idempotencyKey checkoutSession:$checkoutSession)');
    expect(body.variables).toEqual({ idempotencyKey: 'k', checkoutSession: 'cs_1' });
  });

  it('a stream that ends without a final state fails once', async () => {
    const s = stream();
    const failed = vi.fn();
    openSse(opts(async () => s.response), { next: () => {}, failed });
    await tick();
    s.next(processing);
    s.end();
    await tick();
    expect(failed).toHaveBeenCalledTimes(1);
    expect(failed.mock.calls[0]![0]).toMatch(/without a final state/);
  });

  it('an error answer (NOT_FOUND, a 401) fails with its code', async () => {
    const failed = vi.fn();
    openSse(opts(async () => json({ errors: [{ message: 'no', extensions: { code: 'UNAUTHENTICATED' } }] }, 401)), { next: () => {}, failed });
    await tick();
    expect(failed).toHaveBeenCalledWith('HTTP 401 UNAUTHENTICATED');
  });

  it('the charger follows PROCESSING over SSE to the outcome, and never resends chargeCard', async () => {
    const server = new FakeServer();
    server.script = ['processing'];
    const s = stream();
    const events: ChargerEvent[] = [];
    const fetch: typeof globalThis.fetch = async (u, i) => (new Headers(i?.headers).get('Accept') === 'text/event-stream' ? s.response : server.fetch(u, i));
    const c = createCharger({ endpoint: '/graphql', publishableKey: 'co_pk_1', session: 'cs_1', storage: new MemoryStorage(), crossTab: false, fetch, environment: {}, onEvent: (e) => events.push(e) });
    const p = c.pay({ paymentMethod: 'pm' });
    await tick();
    await tick();
    expect(c.state).toMatchObject({ kind: 'following', live: 'sse', liveOpen: false });
    s.next({ ...processing, idempotencyKey: keyOf(c.state) });
    await tick();
    expect(c.state).toMatchObject({ kind: 'following', liveOpen: true });
    s.next({ ...succeeded, idempotencyKey: keyOf(c.state) });
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(server.chargeCards).toHaveLength(1);
    expect(events.map((e) => e.type)).toContain('live-open');
    c.close();
  });

  it('the charger polls chargeStatus when the stream cannot be opened', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const server = new FakeServer();
      server.script = ['processing'];
      const events: ChargerEvent[] = [];
      const fetch: typeof globalThis.fetch = async (u, i) =>
        new Headers(i?.headers).get('Accept') === 'text/event-stream' ? new Response('<html>502</html>', { status: 502 }) : server.fetch(u, i);
      const c = createCharger({ endpoint: '/graphql', publishableKey: 'co_pk_1', session: 'cs_1', storage: new MemoryStorage(), crossTab: false, fetch, environment: {}, onEvent: (e) => events.push(e) });
      const p = c.pay({ paymentMethod: 'pm' });
      await vi.advanceTimersByTimeAsync(0);
      expect(c.state).toMatchObject({ kind: 'following', live: 'poll' });
      expect(events.find((e) => e.type === 'live-failed')).toMatchObject({ mode: 'sse', reason: 'HTTP 502' });
      server.finish(keyOf(c.state));
      await vi.advanceTimersByTimeAsync(500); // the server's retryAfterMs
      await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
      c.close();
    } finally {
      vi.useRealTimers();
    }
  });
});

/** A websocket that speaks the server's side of graphql-transport-ws as the test says. */
class FakeSocket {
  static last: FakeSocket | null = null;
  readyState = 0;
  sent: { type: string; id?: string; payload?: unknown }[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: string }) => void) | null = null;
  onerror: (() => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  constructor(
    readonly url: string,
    readonly protocol: string,
  ) {
    FakeSocket.last = this;
  }
  send(s: string) {
    this.sent.push(JSON.parse(s) as FakeSocket['sent'][number]);
  }
  close(code = 1000) {
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }
  open() {
    this.readyState = 1;
    this.onopen?.();
  }
  say(m: object) {
    this.onmessage?.({ data: JSON.stringify(m) });
  }
}

describe('websocket (graphql-transport-ws)', () => {
  afterEach(() => {
    FakeSocket.last = null;
  });

  it('connection_init carries the authorization; subscribe after the ack; pong to ping', () => {
    const got: ChargePayload[] = [];
    const failed = vi.fn();
    openWs({ ...opts(fetch), WebSocket: FakeSocket as unknown as typeof WebSocket }, { next: (p) => got.push(p), failed });
    const ws = FakeSocket.last!;
    expect(ws.url).toBe('wss://api.example/graphql');
    expect(ws.protocol).toBe('graphql-transport-ws');
    ws.open();
    expect(ws.sent[0]).toEqual({ type: 'connection_init', payload: { authorization: 'Bearer co_pk_1' } });
    ws.say({ type: 'connection_ack' });
    expect(ws.sent[1]).toMatchObject({ type: 'subscribe', id: '1', payload: { variables: { idempotencyKey: 'k', checkoutSession: 'cs_1' } } });
    ws.say({ type: 'ping' });
    expect(ws.sent[2]).toEqual({ type: 'pong' });
    ws.say({ type: 'next', id: '1', payload: { data: { chargeUpdated: processing } } });
    ws.say({ type: 'next', id: '1', payload: { data: { chargeUpdated: succeeded } } });
    expect(got.map((p) => p.status)).toEqual(['PROCESSING', 'SUCCEEDED']);
    expect(failed).not.toHaveBeenCalled();
    expect(ws.readyState).toBe(3); // closed after the final state
  });

  it('a close before a final state (4403) fails once', () => {
    const failed = vi.fn();
    openWs({ ...opts(fetch), WebSocket: FakeSocket as unknown as typeof WebSocket }, { next: () => {}, failed });
    FakeSocket.last!.open();
    FakeSocket.last!.onclose?.({ code: 4403, reason: 'Forbidden' });
    FakeSocket.last!.onerror?.();
    expect(failed).toHaveBeenCalledTimes(1);
    expect(failed).toHaveBeenCalledWith('closed 4403 Forbidden');
  });

  it('an error message fails with its code', () => {
    const failed = vi.fn();
    openWs({ ...opts(fetch), WebSocket: FakeSocket as unknown as typeof WebSocket }, { next: () => {}, failed });
    FakeSocket.last!.open();
    FakeSocket.last!.say({ type: 'error', id: '1', payload: [{ message: 'no', extensions: { code: 'NOT_FOUND' } }] });
    expect(failed).toHaveBeenCalledWith('NOT_FOUND');
  });

  it('websocketUrl maps http(s) to ws(s)', () => {
    expect(websocketUrl('http://localhost:8080/graphql')).toBe('ws://localhost:8080/graphql');
    expect(websocketUrl('https://a.example/graphql')).toBe('wss://a.example/graphql');
  });
});

describe('the live transports are loaded when an attempt is PROCESSING', () => {
  afterEach(() => {
    FakeSocket.last = null;
  });

  it('live: ws loads the websocket client, follows PROCESSING to the outcome, and never resends chargeCard', async () => {
    const server = new FakeServer();
    server.script = ['processing'];
    const events: ChargerEvent[] = [];
    const c = createCharger({
      endpoint: 'https://api.example/graphql',
      publishableKey: 'co_pk_1',
      session: 'cs_1',
      storage: new MemoryStorage(),
      crossTab: false,
      live: 'ws',
      fetch: server.fetch,
      environment: { WebSocket: FakeSocket as unknown as typeof WebSocket },
      onEvent: (e) => events.push(e),
    });
    const p = c.pay({ paymentMethod: 'pm' });
    const end = Date.now() + 2_000;
    while (!FakeSocket.last && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
    const ws = FakeSocket.last!;
    expect(ws.url).toBe('wss://api.example/graphql');
    ws.open();
    ws.say({ type: 'connection_ack' });
    ws.say({ type: 'next', id: '1', payload: { data: { chargeUpdated: { ...succeeded, idempotencyKey: keyOf(c.state) } } } });
    await expect(p).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(server.chargeCards).toHaveLength(1);
    expect(events.find((e) => e.type === 'live-open')).toMatchObject({ mode: 'ws' });
    c.close();
  });

  it('a charger closed before the stream code loaded opens no stream', async () => {
    const server = new FakeServer();
    server.script = ['processing'];
    const c = createCharger({ endpoint: '/graphql', session: 'cs_1', storage: new MemoryStorage(), crossTab: false, live: 'ws', fetch: server.fetch, environment: { WebSocket: FakeSocket as unknown as typeof WebSocket } });
    // Closed in the same turn as the PROCESSING answer: the import() has not resolved yet.
    c.subscribe((s) => s.kind === 'following' && c.close());
    const p = c.pay({ paymentMethod: 'pm' }).catch((e: unknown) => e);
    await expect(p).resolves.toMatchObject({ name: 'AbortError' });
    await import('../src/ws.js');
    await new Promise((r) => setTimeout(r, 20));
    expect(FakeSocket.last).toBeNull();
  });
});
