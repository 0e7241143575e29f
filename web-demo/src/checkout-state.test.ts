// Which display the page shows for the charger's state and its own
// (checkout-state.ts): the bank's question of customer authentication, the
// resume, the slow question, and the rules around them.
import type { ChargerState, FollowingState } from '@chargeonce/client';
import { describe, expect, it } from 'vitest';
import { attemptOf, canPay, isBack, isBusy, resultArrived, shownOf, type CheckoutState } from './checkout-state';
import { checkoutOf, settledWith } from './fakes';

const input = { paymentMethod: 'pm_card_authenticationRequired', checkoutSession: 'cs_1' };
const nextAction = { type: 'REDIRECT' as const, url: 'http://127.0.0.1/provider/authenticate/ch_1', expiresAt: '2099-01-01T00:15:00Z' };
const flags = { offline: false, hidden: false, follower: false };
const action: FollowingState = {
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
const idle: ChargerState = { kind: 'idle', flags, paused: false };
const sending: ChargerState = { kind: 'sending', attempt: { key: 'k', input, sends: 1 }, run: { since: 0, tries: 1 }, flags, paused: false };

describe('the action display', () => {
  it("is the charger's following state with a nextAction: the bank's page and deadline, drawn from the charger's own state", () => {
    const shown = shownOf(checkoutOf(action));
    expect(shown).toEqual({ kind: 'action', c: action, nextAction });
    expect(shown.kind === 'action' && shown.c).toBe(action); // the library's state itself, not a copy of its fields
  });

  it('says when the page is on its way to the bank, and when it is the return for this key', () => {
    expect(checkoutOf(action, { leaving: true }).page.leaving).toBe(true);
    expect(isBack(checkoutOf(action, { backKey: 'k' }))).toBe(true);
    expect(isBack(checkoutOf(action, { backKey: 'another' }))).toBe(false);
    expect(isBack(checkoutOf(action))).toBe(false);
  });

  it('the return: resuming says it is back from the bank; the stored attempt sent again shows it', () => {
    const resuming = { step: { kind: 'resuming' as const } };
    expect(shownOf(checkoutOf(idle, { ...resuming, backKey: 'k' }))).toEqual({ kind: 'resuming', back: true });
    expect(shownOf(checkoutOf(idle, resuming))).toEqual({ kind: 'resuming', back: false });
    const resent: ChargerState = { ...sending, attempt: { key: 'k', input, nextAction, sends: 2 } };
    expect(shownOf(checkoutOf(resent, { ...resuming, backKey: 'k' }))).toEqual({ kind: 'resuming', back: true });
    // Once the charger follows the attempt, the resume is no longer the news.
    expect(shownOf(checkoutOf(action, { ...resuming, backKey: 'k' })).kind).toBe('action');
  });

  it('a key taken from the address has no input: the attempt is shown without its card', () => {
    const adopted: ChargerState = { kind: 'following', attempt: { key: 'k', input: null, sends: 0 }, live: 'poll', liveOpen: false, checks: 0, pollMs: 1000, retryInMs: null, flags, paused: false };
    expect(attemptOf(checkoutOf(adopted, { backKey: 'k' }))).toEqual({ key: 'k', input: null, sends: 0 });
    const outcome = { status: 'FAILED' as const, key: 'k', replayed: false, failure: { code: 'authentication_failed', message: 'no' } };
    expect(attemptOf(checkoutOf({ kind: 'settled', attempt: { key: 'k', input: null, sends: 0 }, outcome, flags, paused: false }))).toEqual({ key: 'k', input: null, sends: 0 });
  });

  it('Pay is off and not busy: the page waits for the shopper, not for the server', () => {
    const s = checkoutOf(action);
    expect(canPay(s)).toBe(false);
    expect(isBusy(s)).toBe(false);
  });

  it("the focus goes to the outcome when the bank's question arrives, and when its answer does; not on a redraw", () => {
    const paying: CheckoutState = checkoutOf(idle, { step: { kind: 'starting' } });
    const asking = checkoutOf(action);
    const final = settledWith({ status: 'SUCCEEDED', key: 'k', charge: { id: 'c', amount: 1, currency: 'USD', providerChargeId: 'ch', createdAt: '', captureStatus: 'CAPTURED', amountCaptured: 1, amountCapturable: 0, authorizationExpiresAt: null }, replayed: false });
    expect(resultArrived(paying, asking)).toBe(true);
    expect(resultArrived(asking, checkoutOf(action, { leaving: true }))).toBe(false);
    expect(resultArrived(asking, final)).toBe(true);
  });
});

describe("the page's own beside the charger's", () => {
  it("the shop's session asked for, or refused, stands in for the charger's state", () => {
    expect(shownOf(checkoutOf(idle, { step: { kind: 'starting' } }))).toEqual({ kind: 'paying', c: null });
    expect(shownOf(checkoutOf(idle, { step: { kind: 'noSession', message: 'no', code: null } }))).toEqual({ kind: 'noSession', message: 'no', code: null });
  });

  it('a slow chargeCard that chargeStatus said PROCESSING of shows processing, still the sending state', () => {
    const shown = shownOf(checkoutOf(sending, { slow: { key: 'k', checks: 1, retryAfterMs: 1000 } }));
    expect(shown).toEqual({ kind: 'processing', c: sending });
    expect(shownOf(checkoutOf(sending))).toEqual({ kind: 'paying', c: sending });
  });

  it("paused is the charger's flag: the page shows it whatever the waiting kind", () => {
    const paused: ChargerState = { ...action, attempt: { key: 'k', input, sends: 1 }, paused: true, retryInMs: null, flags: { ...flags, offline: true } };
    expect(shownOf(checkoutOf(paused)).kind).toBe('paused');
    expect(isBusy(checkoutOf(paused))).toBe(true);
  });
});
