// chargeUpdated over a websocket with the graphql-transport-ws
// subprotocol. Loaded by the charger only for live: 'ws', when an attempt
// is PROCESSING. Only the subscription goes over it: chargeCard is always
// a POST.
import { once, subscription, why, type GraphQLResult, type LiveHandlers, type LiveOptions } from './stream.js';
import { describe } from './transport.js';

/** The websocket URL for an http(s) endpoint, relative ones against the page's location. */
export function websocketUrl(endpoint: string): string {
  const u = new URL(endpoint, (globalThis as { location?: { href: string } }).location?.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

/** Follows the attempt; returns what ends it. */
export function open(o: LiveOptions, handlers: LiveHandlers): () => void {
  let ws: WebSocket | undefined;
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
  try {
    const WS = o.WebSocket ?? globalThis.WebSocket;
    if (!WS) throw new Error('no WebSocket here');
    ws = new WS(o.wsEndpoint ?? websocketUrl(o.endpoint), 'graphql-transport-ws');
  } catch (err) {
    h.failed(describe(err));
    return () => {};
  }
  const socket = ws;
  const send = (m: object) => socket.send(JSON.stringify(m));
  socket.onopen = () => send({ type: 'connection_init', payload: { authorization: o.authorization } });
  socket.onmessage = (m: MessageEvent) => {
    let f: { type?: string; payload?: unknown };
    try {
      f = JSON.parse(String(m.data)) as typeof f;
    } catch {
      return h.failed('a message that is not JSON');
    }
    if (f.type === 'connection_ack') send({ type: 'subscribe', id: '1', payload: { ...subscription, variables: o.variables } });
    else if (f.type === 'ping') send({ type: 'pong' });
    else if (f.type === 'next') h.result(f.payload as GraphQLResult);
    else if (f.type === 'error') h.failed(why(f.payload as GraphQLResult['errors'], 'error'));
    else if (f.type === 'complete') h.failed('the subscription completed without a final state');
  };
  socket.onerror = () => h.failed('websocket error');
  socket.onclose = (ev: CloseEvent) => h.failed(`closed ${ev.code} ${ev.reason}`.trim());
  return () => h.failed('closed');
}
