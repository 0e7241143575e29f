// The timeline's live status row, drawn from the charger's state and events.
import type { ChargerState, FollowingState } from '@chargeonce/client';
import { describe, expect, it } from 'vitest';
import { liveRows } from './liverow';
import type { RequestRecord } from './timeline';

function recorder() {
  const rows: RequestRecord[] = [];
  const live = liveRows({
    sent: (r) => {
      const rec = { ...r, n: rows.length + 1 };
      rows.push(rec);
      return rec;
    },
    update: (r) => void (rows[r.n - 1] = r),
  });
  return { rows, live };
}

const input = { paymentMethod: 'pm_card_lostResponse', checkoutSession: 'cs_1' };
const flags = { offline: false, hidden: false, follower: false };
const sending: ChargerState = { kind: 'sending', attempt: { key: 'k', input, sends: 1 }, run: { since: 0, tries: 1 }, flags, paused: false };
const connecting: FollowingState = { kind: 'following', attempt: { key: 'k', input, sends: 1 }, live: 'ws', liveOpen: false, checks: 0, pollMs: 1000, retryInMs: null, flags, paused: false };
const subscribed: ChargerState = { ...connecting, liveOpen: true };
const outcome = { status: 'SUCCEEDED' as const, key: 'k', replayed: true, charge: { id: 'c', amount: 1, currency: 'USD', providerChargeId: 'ch', createdAt: '', captureStatus: 'CAPTURED' as const, amountCaptured: 1, amountCapturable: 0, authorizationExpiresAt: null } };
const settled: ChargerState = { kind: 'settled', attempt: { key: 'k', input, sends: 1 }, outcome, flags, paused: false };

describe('the live status row', () => {
  it('connecting, subscribed, then the final state by the stream', () => {
    const { rows, live } = recorder();
    live.state(connecting, sending);
    expect(rows).toMatchObject([{ operation: 'chargeUpdated', idempotencyKey: 'k', outcome: 'pending' }]);
    live.event({ type: 'live-open', key: 'k', mode: 'ws' });
    live.state(subscribed, connecting);
    expect(rows[0]).toMatchObject({ outcome: 'pending', status: 'PROCESSING', detail: 'subscribed' });
    live.state(settled, subscribed);
    expect(rows[0]).toMatchObject({ outcome: 'answered', status: 'SUCCEEDED', replayed: true });
  });

  it('the final state by chargeStatus first: the row is closed', () => {
    const { rows, live } = recorder();
    live.state(connecting, sending);
    live.state(subscribed, connecting);
    live.event({ type: 'answer', key: 'k', operation: 'chargeStatus', status: 'SUCCEEDED', replayed: true, http: 200 });
    live.state(settled, subscribed);
    expect(rows[0]).toMatchObject({ outcome: 'closed', status: 'SUCCEEDED' });
  });

  it('the socket fails: unavailable, with the reason, and polling', () => {
    const { rows, live } = recorder();
    live.state(connecting, sending);
    live.event({ type: 'live-failed', key: 'k', mode: 'ws', reason: 'closed 1011' });
    live.state({ ...connecting, live: 'poll', retryInMs: 5000 }, connecting);
    expect(rows).toMatchObject([{ outcome: 'unavailable', detail: 'closed 1011' }]);
  });

  it('a stream that says nothing in time: unavailable too', () => {
    const { rows, live } = recorder();
    live.state(connecting, sending);
    live.state({ ...connecting, live: 'poll', retryInMs: 0 }, connecting);
    expect(rows).toMatchObject([{ outcome: 'unavailable', detail: 'no answer in time' }]);
  });

  it('the attempt waits for the shopper to authenticate: followed live as PROCESSING is, until the outcome', () => {
    const { rows, live } = recorder();
    const nextAction = { type: 'REDIRECT' as const, url: 'http://x/provider/authenticate/ch', expiresAt: '2099-01-01T00:00:00Z' };
    const action: FollowingState = { ...connecting, attempt: { ...connecting.attempt, nextAction } };
    live.state(action, sending);
    expect(rows).toMatchObject([{ operation: 'chargeUpdated', outcome: 'pending' }]);
    live.state({ ...action, liveOpen: true }, action);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ outcome: 'pending', detail: 'subscribed' });
    live.state(settled, { ...action, liveOpen: true });
    expect(rows[0]).toMatchObject({ outcome: 'answered', status: 'SUCCEEDED' });
  });
});
