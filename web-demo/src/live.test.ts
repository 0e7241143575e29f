// The live status transport (live.ts): what it tells the checkout, and the
// timeline row that says which path the page took, driven through a fake
// graphql-ws client.
import type { Client, Sink } from 'graphql-ws';
import { describe, expect, it } from 'vitest';
import type { ChargeResultFragment } from './generated/graphql';
import { describeError, liveStatus, websocketURL } from './live';
import type { RequestRecord } from './transport';
import { describeRequest } from './view';

/** A graphql-ws client whose subscription the test drives. */
class FakeClient implements Pick<Client, 'subscribe'> {
  readonly subscriptions: { payload: { query: string; variables?: unknown }; sink: Sink; disposed: boolean }[] = [];
  subscribe<Data>(payload: { query: string; variables?: unknown }, sink: Sink<Data>): () => void {
    const s = { payload, sink: sink as Sink, disposed: false };
    this.subscriptions.push(s);
    return () => {
      s.disposed = true;
    };
  }
}

const state = (status: ChargeResultFragment['status']): ChargeResultFragment => ({
  idempotencyKey: 'key-1',
  status,
  replayed: status !== 'PROCESSING',
  retryAfterMs: status === 'PROCESSING' ? 1000 : null,
  expiresAt: null,
  charge: null,
  failure: null,
});

function setup() {
  const client = new FakeClient();
  const rows: RequestRecord[] = [];
  const told: string[] = [];
  const hooks = {
    sent(r: Omit<RequestRecord, 'n'>) {
      const rec = { ...r, n: rows.length + 1 };
      rows.push(rec);
      return rec;
    },
    update(r: RequestRecord) {
      rows[r.n - 1] = r;
    },
  };
  const watch = liveStatus(client, hooks, (key) => `cs_of_${key}`);
  const stop = watch('key-1', {
    next: (p) => told.push(p.status),
    failed: (reason) => told.push(`failed: ${reason}`),
  });
  const sub = client.subscriptions[0];
  const text = () => describeRequest(rows[0]).text;
  return { client, rows, told, stop, sub, text };
}

describe('live status over graphql-ws', () => {
  it('subscribes to chargeUpdated for the key, and the row says connecting', () => {
    const { sub, rows, text } = setup();
    expect(sub.payload.query).toContain('subscription SessionChargeUpdated');
    expect(sub.payload.variables).toEqual({ idempotencyKey: 'key-1', checkoutSession: 'cs_of_key-1' });
    expect(rows[0]).toMatchObject({ operation: 'SessionChargeUpdated', idempotencyKey: 'key-1', checkoutSession: 'cs_of_key-1', outcome: 'pending' });
    expect(text()).toBe('live status: connecting…');
  });

  it('PROCESSING, then a final state: the row says subscribed, then the status', () => {
    const { sub, rows, told, text } = setup();
    sub.sink.next({ data: { chargeUpdated: state('PROCESSING') } });
    expect(text()).toBe('live status: subscribed · PROCESSING');
    sub.sink.next({ data: { chargeUpdated: state('SUCCEEDED') } });
    sub.sink.complete();
    expect(rows[0]).toMatchObject({ outcome: 'answered', status: 'SUCCEEDED', replayed: true });
    expect(text()).toBe('live status: subscribed · SUCCEEDED · replayed: true');
    expect(told).toEqual(['PROCESSING', 'SUCCEEDED']);
  });

  it('a socket that cannot connect: failed once, and the row says the page polls', () => {
    const { sub, told, text } = setup();
    sub.sink.error({ code: 1006, reason: '' });
    sub.sink.complete();
    expect(told).toEqual(['failed: closed 1006']);
    expect(text()).toBe('live status unavailable: polling (closed 1006)');
  });

  it('a GraphQL error (NOT_FOUND) fails it, and ends the subscription', () => {
    const { sub, told, text } = setup();
    sub.sink.next({ errors: [{ message: 'no charge attempt', extensions: { code: 'NOT_FOUND' } }] } as never);
    expect(told).toEqual(['failed: NOT_FOUND']);
    expect(sub.disposed).toBe(true);
    expect(text()).toBe('live status unavailable: polling (NOT_FOUND)');
  });

  it('an end without a final state fails it', () => {
    const { sub, told } = setup();
    sub.sink.next({ data: { chargeUpdated: state('PROCESSING') } });
    sub.sink.complete();
    expect(told).toEqual(['PROCESSING', 'failed: the subscription ended without a final state']);
  });

  it('stopped by the page before a final state: the row says closed', () => {
    const { sub, stop, told, text } = setup();
    sub.sink.next({ data: { chargeUpdated: state('PROCESSING') } });
    stop();
    expect(sub.disposed).toBe(true);
    expect(text()).toContain('closed');
    sub.sink.error({ code: 1000, reason: '' });
    expect(told).toEqual(['PROCESSING']);
  });

  it('websocketURL follows the page: ws for http, wss for https', () => {
    expect(websocketURL({ protocol: 'http:', host: '127.0.0.1:8080' })).toBe('ws://127.0.0.1:8080/graphql');
    expect(websocketURL({ protocol: 'https:', host: 'shop.example' })).toBe('wss://shop.example/graphql');
  });

  it('describeError: a close code, GraphQL errors, an error, or an event', () => {
    expect(describeError({ code: 4403, reason: 'Forbidden' })).toBe('closed 4403 Forbidden');
    expect(describeError([{ message: 'x', extensions: { code: 'RATE_LIMITED' } }])).toBe('RATE_LIMITED');
    expect(describeError(new Error('boom'))).toBe('boom');
    expect(describeError({ type: 'error' })).toBe('could not connect');
  });
});
