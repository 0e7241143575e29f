// The live status of an attempt: the chargeUpdated subscription over a
// websocket (graphql-ws, the graphql-transport-ws protocol), as the
// checkout's transport offers it (CheckoutTransport.watch), recorded in the
// timeline like every request the page sends. Browsers cannot set headers on
// a websocket, so the publishable key goes in connection_init, and the
// subscription names the checkout session the attempt pays.
import { stringifyDocument } from '@urql/core';
import { createClient, type Client } from 'graphql-ws';
import type { LiveHandlers } from './checkout';
import { SessionChargeUpdatedDocument, type SessionChargeUpdatedSubscription } from './generated/graphql';
import type { RequestRecord } from './transport';

/** Where the subscription's timeline row goes: the same hooks as the fetch's. */
export interface LiveHooks {
  sent(r: Omit<RequestRecord, 'n'>): RequestRecord;
  update(r: RequestRecord): void;
}

/**
 * A graphql-ws client for the page's server. It connects on the first
 * subscription and never retries: when the socket cannot be had, the
 * checkout polls chargeStatus instead.
 */
export function createLiveClient(url: string, publishableKey: () => string | null): Client {
  return createClient({
    url,
    connectionParams: () => ({ authorization: `Bearer ${publishableKey() ?? ''}` }),
    lazy: true,
    retryAttempts: 0,
  });
}

/** The websocket URL of path on the page's own server. */
export function websocketURL(location: Pick<Location, 'protocol' | 'host'>, path = '/graphql'): string {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${path}`;
}

/** The operation name of the live status subscription, as the timeline records it. */
export const liveOperation = 'SessionChargeUpdated';

/**
 * The checkout's watch: subscribes to chargeUpdated for key, on the checkout
 * session sessionOf names for it, through client and tells handlers; the
 * timeline row says which path the page took.
 */
export function liveStatus(client: Pick<Client, 'subscribe'>, hooks: LiveHooks, sessionOf: (key: string) => string) {
  return (key: string, handlers: LiveHandlers): (() => void) => {
    const checkoutSession = sessionOf(key);
    let rec = hooks.sent({ operation: liveOperation, idempotencyKey: key, checkoutSession, sentAt: new Date().toISOString(), outcome: 'pending' });
    let ended = false;
    let unsubscribe: (() => void) | null = null;
    const end = (next: RequestRecord) => {
      ended = true;
      rec = next;
      hooks.update(next);
    };
    const fail = (reason: string) => {
      if (ended) return;
      end({ ...rec, outcome: 'unavailable', detail: reason });
      handlers.failed(reason);
      unsubscribe?.();
    };
    unsubscribe = client.subscribe<SessionChargeUpdatedSubscription>(
      {
        query: stringifyDocument(SessionChargeUpdatedDocument),
        operationName: liveOperation,
        variables: { idempotencyKey: key, checkoutSession },
      },
      {
        next(result) {
          if (ended) return;
          const p = result.data?.chargeUpdated;
          if (result.errors?.length || !p) {
            const e = result.errors?.[0];
            const code = e?.extensions?.code;
            fail(typeof code === 'string' ? code : (e?.message ?? 'no data'));
            return;
          }
          if (p.status === 'PROCESSING') {
            rec = { ...rec, status: p.status, detail: 'subscribed' };
            hooks.update(rec);
          } else {
            end({ ...rec, outcome: 'answered', status: p.status, replayed: p.replayed, detail: 'subscribed' });
          }
          handlers.next(p);
        },
        error(err) {
          fail(describeError(err));
        },
        complete() {
          fail('the subscription ended without a final state');
        },
      },
    );
    if (ended) unsubscribe();
    return () => {
      if (!ended) end({ ...rec, outcome: 'closed' });
      unsubscribe?.();
    };
  };
}

/** A few words on why a subscription failed: a close code, a connection error, or GraphQL errors. */
export function describeError(err: unknown): string {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
    const { code, reason } = err as { code: number; reason?: string };
    return `closed ${code}${reason ? ` ${reason}` : ''}`;
  }
  if (Array.isArray(err) && err.length > 0) {
    const code = (err[0] as { extensions?: { code?: unknown } }).extensions?.code;
    return typeof code === 'string' ? code : String((err[0] as { message?: unknown }).message ?? 'error');
  }
  if (err instanceof Error) return err.message;
  return 'could not connect';
}
