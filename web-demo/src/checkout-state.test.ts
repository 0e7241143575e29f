// The page's phase made from the charger's state (checkout-state.ts): the
// action phase of customer authentication, and the rules around it.
import type { ChargerState } from '@chargeonce/client';
import { describe, expect, it } from 'vitest';
import { canPay, isBusy, resultArrived, viewOf, type CheckoutState, type Decor } from './checkout-state';

const decor = (over: Partial<Decor> = {}): Decor => ({
  resuming: false,
  retry: null,
  liveDown: false,
  nextCheckAt: 0,
  slow: null,
  leaving: false,
  backKey: null,
  ...over,
});

const input = { paymentMethod: 'pm_card_authenticationRequired', checkoutSession: 'cs_1' };
const nextAction = { type: 'REDIRECT' as const, url: 'http://127.0.0.1/provider/authenticate/ch_1', expiresAt: '2099-01-01T00:15:00Z' };
const flags = { offline: false, hidden: false, follower: false };
const action: ChargerState = {
  kind: 'following',
  attempt: { key: 'k', input, nextAction, sends: 1 },
  live: 'ws',
  liveOpen: true,
  checks: 0,
  pollMs: 1000,
  retryInMs: null,
  flags,
  paused: false,
};

describe('the action phase', () => {
  it("is the charger's following state with a nextAction: the bank's page and deadline, followed live", () => {
    expect(viewOf(action, decor(), 0)).toEqual({
      attempt: { key: 'k', input, state: 'open' },
      phase: { kind: 'action', key: 'k', url: nextAction.url, expiresAt: nextAction.expiresAt, leaving: false, back: false, live: 'subscribed' },
    });
  });

  it('says when the page is on its way to the bank, and when it is the return for this key', () => {
    expect(viewOf(action, decor({ leaving: true }), 0).phase).toMatchObject({ kind: 'action', leaving: true, back: false });
    expect(viewOf(action, decor({ backKey: 'k' }), 0).phase).toMatchObject({ kind: 'action', back: true });
    expect(viewOf(action, decor({ backKey: 'another' }), 0).phase).toMatchObject({ kind: 'action', back: false });
  });

  it('the return: resuming says it is back from the bank; the stored attempt sent again shows it', () => {
    const idle: ChargerState = { kind: 'idle', flags, paused: false };
    expect(viewOf(idle, decor({ resuming: true, backKey: 'k' }), 0).phase).toEqual({ kind: 'resuming', back: true });
    expect(viewOf(idle, decor({ resuming: true }), 0).phase).toEqual({ kind: 'resuming' });
    const resent: ChargerState = { kind: 'sending', attempt: { key: 'k', input, nextAction, sends: 2 }, run: { since: 0, tries: 1 }, flags, paused: false };
    expect(viewOf(resent, decor({ resuming: true, backKey: 'k' }), 0).phase).toEqual({ kind: 'resuming', back: true });
  });

  it('a key taken from the address has no input: the attempt is shown without its card', () => {
    const adopted: ChargerState = { kind: 'following', attempt: { key: 'k', input: null, sends: 0 }, live: 'poll', liveOpen: false, checks: 0, pollMs: 1000, retryInMs: null, flags, paused: false };
    expect(viewOf(adopted, decor({ backKey: 'k' }), 0).attempt).toEqual({ key: 'k', input: null, state: 'open' });
    const outcome = { status: 'FAILED' as const, key: 'k', replayed: false, failure: { code: 'authentication_failed', message: 'no' } };
    expect(viewOf({ kind: 'settled', attempt: { key: 'k', input: null, sends: 0 }, outcome, flags, paused: false }, decor(), 0).attempt).toEqual({ key: 'k', input: null, state: 'FAILED' });
  });

  it('Pay is off and not busy: the page waits for the shopper, not for the server', () => {
    const s = viewOf(action, decor(), 0);
    expect(canPay(s)).toBe(false);
    expect(isBusy(s)).toBe(false);
  });

  it("the focus goes to the outcome when the bank's question arrives, and when its answer does; not on a redraw", () => {
    const paying: CheckoutState = { attempt: null, phase: { kind: 'paying', retry: null } };
    const asking = viewOf(action, decor(), 0);
    const payload = { idempotencyKey: 'k', status: 'SUCCEEDED' as const, replayed: false, charge: null, failure: null };
    const final: CheckoutState = { attempt: { key: 'k', input, state: 'SUCCEEDED' }, phase: { kind: 'final', payload } };
    expect(resultArrived(paying, asking)).toBe(true);
    expect(resultArrived(asking, viewOf(action, decor({ leaving: true }), 0))).toBe(false);
    expect(resultArrived(asking, final)).toBe(true);
  });
});
