// What the two live transports share (sse.ts, ws.ts): the subscription's
// document, reading one of its results, and handlers that end once. Loaded
// with them, only when an attempt is PROCESSING and followed live.
import { chargeUpdatedDocument } from './generated/operations.js';
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

export interface GraphQLResult {
  data?: { chargeUpdated?: ChargePayload | null } | null;
  errors?: { message?: string; extensions?: { code?: string } }[];
}

export const subscription = { operationName: 'ChargeUpdated', query: chargeUpdatedDocument };

/** The first error's code (or message), or fallback. */
export function why(errors: GraphQLResult['errors'], fallback: string): string {
  const e = errors?.[0];
  return e?.extensions?.code ?? e?.message ?? fallback;
}

/**
 * Handlers that pass on each state of one GraphQL result, and at most one
 * failure, and nothing after it nor after a final state; stop ends the
 * transport.
 */
export function once(h: LiveHandlers, stop: () => void): { result(r: GraphQLResult | undefined): void; failed(reason: string): void; done(): boolean } {
  let ended = false;
  const end = () => {
    ended = true;
    stop();
  };
  return {
    done: () => ended,
    result(r) {
      const p = r?.data?.chargeUpdated;
      if (!p || r?.errors?.length) return this.failed(why(r?.errors, 'no data'));
      if (ended) return;
      if (p.status !== 'PROCESSING') end();
      h.next(p);
    },
    failed(reason) {
      if (ended) return;
      end();
      h.failed(reason);
    },
  };
}
