// Following a PROCESSING attempt live: the chargeUpdated subscription over
// server-sent events (POST with Accept: text/event-stream, read with fetch
// and a ReadableStream) or a websocket (graphql-transport-ws). Either one
// tells its handlers each state, then fails once, at most, when it cannot
// start, errs, or ends without a final state; the charger then polls
// chargeStatus. Only the subscription ever goes over these: chargeCard is
// always a POST.
import { chargeUpdatedDocument, describe } from './transport.js';
import type { ChargePayload } from './types.js';

export interface LiveHandlers {
  next(p: ChargePayload): void;
  failed(reason: string): void;
}

export interface LiveOptions {
  fetch: typeof fetch;
  endpoint: string;
  /** The websocket URL: endpoint with ws(s): by default. */
  wsEndpoint?: string;
  headers: Record<string, string>;
  /** "Bearer <key>", for the websocket's connection_init (browsers cannot set headers on one). */
  authorization: string;
  variables: { idempotencyKey: string; checkoutSession?: string };
  WebSocket?: typeof WebSocket;
}

interface GraphQLResult {
  data?: { chargeUpdated?: ChargePayload | null } | null;
  errors?: { message?: string; extensions?: { code?: string } }[];
}

/** Reads one GraphQL result of the subscription: the payload, or why there is none. */
function read(result: GraphQLResult | undefined): ChargePayload | string {
  const p = result?.data?.chargeUpdated;
  if (p && !result?.errors?.length) return p;
  const e = result?.errors?.[0];
  return e?.extensions?.code ?? e?.message ?? 'no data';
}

/** Makes handlers that pass on at most one failure and nothing after it, nor after a final state. */
function once(h: LiveHandlers, stop: () => void): LiveHandlers & { done: () => boolean } {
  let ended = false;
  return {
    done: () => ended,
    next(p) {
      if (ended) return;
      if (p.status !== 'PROCESSING') {
        ended = true;
        stop();
      }
      h.next(p);
    },
    failed(reason) {
      if (ended) return;
      ended = true;
      stop();
      h.failed(reason);
    },
  };
}

/** chargeUpdated over server-sent events. Returns what ends it. */
export function openSse(o: LiveOptions, handlers: LiveHandlers): () => void {
  const ctl = new AbortController();
  const h = once(handlers, () => ctl.abort());
  void (async () => {
    const res = await o.fetch(o.endpoint, {
      method: 'POST',
      headers: { ...o.headers, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ operationName: 'ChargeUpdated', query: chargeUpdatedDocument, variables: o.variables }),
      signal: ctl.signal,
    });
    if (!res.ok || !res.body || !(res.headers.get('Content-Type') ?? '').startsWith('text/event-stream')) {
      let why = `HTTP ${res.status}`;
      try {
        const r = read(JSON.parse(await res.text()) as GraphQLResult);
        if (typeof r === 'string') why += ` ${r}`;
      } catch {
        // not JSON: the status says enough
      }
      h.failed(why);
      return;
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let event = '';
    let data = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line === '') {
          if (event === 'complete') {
            h.failed('the stream completed without a final state');
            return;
          }
          if (data !== '') {
            let r: ChargePayload | string;
            try {
              r = read(JSON.parse(data) as GraphQLResult);
            } catch {
              r = 'an event that is not JSON';
            }
            if (typeof r === 'string') h.failed(r);
            else h.next(r);
            if (h.done()) return;
          }
          event = '';
          data = '';
        } else if (line.startsWith(':')) {
          // a keep-alive comment
        } else if (line.startsWith('event:')) {
          event = line.slice(6).trim();
        } else if (line.startsWith('data:')) {
          data += (data ? '\n' : '') + line.slice(5).replace(/^ /, '');
        }
      }
    }
    h.failed('the stream ended without a final state');
  })().catch((err: unknown) => h.failed(describe(err)));
  return () => h.failed('closed');
}

/** The websocket URL for an http(s) endpoint, relative ones against the page's location. */
export function websocketUrl(endpoint: string): string {
  const base = (globalThis as { location?: { href: string } }).location?.href;
  const u = new URL(endpoint, base);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

/** chargeUpdated over a websocket with the graphql-transport-ws subprotocol. Returns what ends it. */
export function openWs(o: LiveOptions, handlers: LiveHandlers): () => void {
  const WS = o.WebSocket ?? (globalThis as { WebSocket?: typeof WebSocket }).WebSocket;
  let ws: WebSocket | null = null;
  const h = once(handlers, () => {
    try {
      if (ws && ws.readyState <= 1) {
        if (ws.readyState === 1) ws.send(JSON.stringify({ type: 'complete', id: '1' }));
        ws.close(1000);
      }
    } catch {
      // closing a socket that is gone
    }
  });
  if (!WS) {
    h.failed('no WebSocket here');
    return () => {};
  }
  try {
    ws = new WS(o.wsEndpoint ?? websocketUrl(o.endpoint), 'graphql-transport-ws');
  } catch (err) {
    h.failed(describe(err));
    return () => {};
  }
  const socket = ws;
  const send = (m: object) => socket.send(JSON.stringify(m));
  socket.onopen = () => send({ type: 'connection_init', payload: { authorization: o.authorization } });
  socket.onmessage = (m: MessageEvent) => {
    let f: { type?: string; id?: string; payload?: unknown };
    try {
      f = JSON.parse(String(m.data)) as typeof f;
    } catch {
      h.failed('a message that is not JSON');
      return;
    }
    switch (f.type) {
      case 'connection_ack':
        send({ type: 'subscribe', id: '1', payload: { operationName: 'ChargeUpdated', query: chargeUpdatedDocument, variables: o.variables } });
        return;
      case 'ping':
        send({ type: 'pong' });
        return;
      case 'next': {
        const r = read(f.payload as GraphQLResult);
        if (typeof r === 'string') h.failed(r);
        else h.next(r);
        return;
      }
      case 'error': {
        const errs = f.payload as GraphQLResult['errors'];
        h.failed(errs?.[0]?.extensions?.code ?? errs?.[0]?.message ?? 'error');
        return;
      }
      case 'complete':
        h.failed('the subscription completed without a final state');
        return;
    }
  };
  socket.onerror = () => h.failed('websocket error');
  socket.onclose = (ev: CloseEvent) => h.failed(`closed ${ev.code}${ev.reason ? ` ${ev.reason}` : ''}`);
  return () => h.failed('closed');
}
