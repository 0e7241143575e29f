// What the page shows and says for each state: the views that render.ts
// paints, computed without a DOM.
import { describe, expect, it } from 'vitest';
import type { ChargerFlags, ChargerState, FollowingState, Outcome, RetryingState, SendingState } from '@chargeonce/client';
import { pageState, type CheckoutState, type PageState } from './checkout';
import type { Ledger } from './ledger';
import { describeRequest } from './rowtext';
import {
  announcement,
  authenticateButtonView,
  countdownText,
  deadlineText,
  lockedNote,
  newAttemptLabel,
  outcomeView,
  payButtonView,
  type OutcomeView,
  type RenderContext,
} from './view';

// The charger's states, as the library gives them, and the page's own beside them.
const input = { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_cart' };
const flags: ChargerFlags = { offline: false, hidden: false, follower: false };
const open = { key: 'key-1', input, sends: 1 };
const idle: ChargerState = { kind: 'idle', flags, paused: false };
const sending = (over: Partial<SendingState> = {}): SendingState => ({ kind: 'sending', attempt: open, run: { since: 0, tries: 1 }, flags, paused: false, ...over });
const retrying = (cause: string, retryInMs: number | null = 500, over: Partial<RetryingState> = {}): RetryingState => ({
  kind: 'retrying',
  attempt: open,
  run: { since: 0, tries: 1 },
  retryInMs,
  cause,
  flags,
  paused: false,
  ...over,
});
const following = (over: Partial<FollowingState> = {}): FollowingState => ({
  kind: 'following',
  attempt: open,
  live: 'poll',
  liveOpen: false,
  checks: 0,
  pollMs: 3000,
  retryInMs: 3000,
  flags,
  paused: false,
  ...over,
});
const unknown = (code?: string): ChargerState => ({ kind: 'unknown', attempt: open, ...(code ? { error: { code, message: code } } : {}), flags, paused: false });
const rejected = (code: string, message = 'refused'): ChargerState => ({ kind: 'rejected', attempt: open, error: { code, message }, flags, paused: false });
const settled = (outcome: Outcome): ChargerState => ({ kind: 'settled', attempt: open, outcome, flags, paused: false });
const paused = (by: 'offline' | 'hidden'): ChargerState => retrying('network', null, { paused: true, flags: { ...flags, [by]: true } });

const charge = { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-11-29T12:00:00Z', captureStatus: 'CAPTURED' as const, amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null };
const succeeded = (over: { replayed?: boolean } = {}): Outcome => ({ status: 'SUCCEEDED', key: 'key-1', charge, replayed: false, ...over });
const declined: Outcome = { status: 'FAILED', key: 'key-1', failure: { code: 'card_declined', message: 'Your card was declined.' }, replayed: false };

const state = (charger: ChargerState, page: Partial<PageState> = {}): CheckoutState => ({ charger, page: pageState(page) });
const resuming = (over: Partial<PageState> = {}) => state(idle, { step: { kind: 'resuming' }, ...over });
const noSession = (message: string, code: string | null) => state(idle, { step: { kind: 'noSession', message, code } });
const safe: RenderContext = { unsafe: false, ledger: null, keysSent: 1, responseLost: false };
const unsafe: RenderContext = { ...safe, unsafe: true };
const ledgerOf = (succeededCharges: number): Ledger => ({ charges: [], succeeded: succeededCharges, refunds: [], captures: [], voids: [] });

/** All the words of an outcome view. */
const words = (v: OutcomeView | null) =>
  v ? [v.title, ...v.lines.flatMap((l) => l.parts.map((p) => (typeof p === 'string' ? p : p.text)))].join(' ') : '';

/** PROCESSING, polled, with remainingMs to the next question by the page's clock. */
const processing = (over: Partial<FollowingState> = {}, remainingMs = 3000) => state(following(over), { remainingMs });

describe('the Pay button', () => {
  it.each([
    ['idle', state(idle), { label: 'Pay $113.00', disabled: false, busy: false, hidden: false }],
    ['paying', state(sending()), { label: 'Paying…', disabled: true, busy: true, hidden: false }],
    ['paying: the shop\'s session asked for', state(idle, { step: { kind: 'starting' } }), { label: 'Paying…', disabled: true, busy: true, hidden: false }],
    ['resuming', resuming(), { label: 'Paying…', disabled: true, busy: true, hidden: false }],
    ['processing', processing(), { label: 'Processing…', disabled: true, busy: true, hidden: false }],
    // The network failed for good: Pay is usable again, and says it repeats the attempt.
    ['unknown', state(unknown()), { label: 'Pay $113.00 (same attempt)', disabled: false, busy: false, hidden: false }],
    // Refused without running: nothing was charged, and Pay starts a new attempt.
    ['refused', state(rejected('X', 'no')), { label: 'Pay $113.00', disabled: false, busy: false, hidden: false }],
    // Offline: the attempt waits under its key.
    ['paused', state(paused('offline')), { label: 'Paying…', disabled: true, busy: true, hidden: false }],
    // The shop gave no checkout session: nothing was sent to chargeonce; Pay asks the shop again.
    ['noSession', noSession('no', null), { label: 'Pay $113.00', disabled: false, busy: false, hidden: false }],
    // The checkout session can no longer be paid: there is nothing to pay until a new checkout.
    ['refused, the session ended', state(rejected('CHECKOUT_SESSION_EXPIRED', 'no')), { label: 'Pay $113.00', disabled: true, busy: false, hidden: true }],
    ['final', state(settled(succeeded())), { label: 'Pay $113.00', disabled: true, busy: false, hidden: true }],
  ])('%s', (_, s, want) => {
    expect(payButtonView(s)).toEqual(want);
  });
});

describe('the words in unsafe mode are honest about the key', () => {
  it('the locked note says the same key in safe mode only', () => {
    expect(lockedNote(state(sending()), safe)).toContain('under the same key');
    const note = lockedNote(state(sending()), unsafe)!;
    expect(note).not.toContain('same key');
    expect(note).toContain('new key');
    expect(lockedNote(state(idle), safe)).toBeNull();
  });

  it('a retry after a lost response: the same key, or a NEW one', () => {
    const s = state(retrying('network'));
    expect(words(outcomeView(s, safe))).toContain('same key');
    expect(words(outcomeView(s, unsafe))).toContain('NEW key');
    expect(words(outcomeView(s, unsafe))).not.toContain('same key');
    expect(announcement(s, safe)).toBe('The response was lost. Retrying with the same key.');
    expect(announcement(s, unsafe)).toBe('The response was lost. Retrying with a new key.');
  });

  it('no answer for good: only safe mode promises that Pay cannot charge twice', () => {
    const s = state(unknown());
    expect(words(outcomeView(s, safe))).toContain('it sends the same key, so it cannot charge twice');
    expect(words(outcomeView(s, unsafe))).not.toContain('cannot charge twice');
    expect(words(outcomeView(s, unsafe))).toContain('a new key can charge again');
    expect(outcomeView(s, safe)?.title).toBe('We could not reach the server');
  });

  it.each(['RATE_LIMITED', 'SERVICE_UNAVAILABLE', 'REQUEST_TIMEOUT'])('a busy server for good (%s) says it ran nothing', (code) => {
    const v = outcomeView(state(unknown(code)), safe)!;
    expect(v.title).toBe('The payment service is busy');
    expect(words(v)).toContain('ran nothing');
  });

  it('a server error for good may have charged: it says so', () => {
    const v = outcomeView(state(unknown('INTERNAL_SERVER_ERROR')), safe)!;
    expect(v.title).toBe('The server had a problem');
    expect(words(v)).toContain('may or may not have been charged');
    expect(words(v)).not.toContain('ran nothing');
  });
});

describe('the checkout session', () => {
  it("the shop's backend gave none: nothing was charged, and Pay asks again", () => {
    const lost = outcomeView(noSession('Failed to fetch', null), safe)!;
    expect(lost).toMatchObject({ tone: 'warning', title: 'The shop could not start the payment' });
    expect(words(lost)).toContain('No answer from the shop: Failed to fetch');
    expect(words(lost)).toContain('Nothing was charged. Pay asks the shop again');
    const busy = outcomeView(noSession('the database is unavailable', 'SERVICE_UNAVAILABLE'), safe)!;
    expect(busy.lines.at(-1)).toEqual({ parts: ['SERVICE_UNAVAILABLE'], className: 'code' });
    expect(newAttemptLabel(noSession('no', null))).toBeNull();
  });

  it.each([
    ['CHECKOUT_SESSION_PAID', 'This order is already paid'],
    ['CHECKOUT_SESSION_EXPIRED', 'This checkout expired'],
    ['CHECKOUT_SESSION_LOCKED', 'Too many attempts'],
  ])('%s: says why, that nothing was charged, and offers a new checkout', (code, title) => {
    const s = state(rejected(code));
    const v = outcomeView(s, safe)!;
    expect(v).toMatchObject({ tone: 'error', title });
    expect(words(v)).toMatch(/charged nothing|Nothing was charged/);
    expect(words(v)).toContain('Start a new checkout');
    expect(newAttemptLabel(s)).toBe('Start a new checkout');
  });

  it('another refusal keeps the attempt: no new checkout offered', () => {
    const s = state(rejected('IDEMPOTENCY_KEY_REUSED', 'the same key with another input'));
    expect(outcomeView(s, safe)?.title).toBe('The payment was refused');
    expect(newAttemptLabel(s)).toBeNull();
  });
});

describe('the outcome of a payment', () => {
  it('SUCCEEDED is green, with the facts', () => {
    const v = outcomeView(state(settled(succeeded())), { ...safe, ledger: ledgerOf(1) })!;
    expect(v).toMatchObject({ tone: 'success', pill: 'SUCCEEDED', title: 'Payment received: $113.00' });
    expect(v.facts.map((f) => [f.term, f.value])).toEqual([
      ['status', 'SUCCEEDED'],
      ['replayed', 'false'],
      ['provider charge', 'ch_1'],
    ]);
  });

  it('charged twice is a red alarm, not a green "Payment received"', () => {
    const v = outcomeView(state(settled(succeeded())), { ...unsafe, keysSent: 2, ledger: ledgerOf(2) })!;
    expect(v.tone).toBe('alarm');
    expect(v.title).toBe('Charged 2 times for one order');
    expect(v.title).not.toContain('Payment received');
    expect(v.lines.find((l) => l.testid === 'charged-twice')).toBeDefined();
    expect(words(v)).toContain('$226.00 for a $113.00 order');
  });

  it('a success under a second key, before the ledger is read, is a warning', () => {
    const v = outcomeView(state(settled(succeeded())), { ...unsafe, keysSent: 2 })!;
    expect(v.tone).toBe('warning');
  });

  it('FAILED is red, with the reason and the way on', () => {
    const s = state(settled(declined));
    const v = outcomeView(s, safe)!;
    expect(v).toMatchObject({ tone: 'error', pill: 'FAILED', title: 'Payment declined' });
    expect(v.lines[0]).toMatchObject({ testid: 'failure-reason', parts: ['Your card was declined.'] });
    expect(newAttemptLabel(s)).toBe('Try another card');
    expect(newAttemptLabel(state(settled(succeeded())))).toBe('Start a new checkout');
    expect(newAttemptLabel(state(unknown()))).toBeNull();
  });

  it('replayed: true is explained, after a lost response or not', () => {
    const s = state(settled(succeeded({ replayed: true })));
    expect(words(outcomeView(s, { ...safe, responseLost: true }))).toContain('whose answer was lost');
    expect(words(outcomeView(s, safe))).toContain('an earlier request with the same key');
  });

  it('shows nothing while idle', () => {
    expect(outcomeView(state(idle), safe)).toBeNull();
  });
});

describe('PROCESSING', () => {
  it('shows a countdown in whole seconds, then that it checks now', () => {
    const v = outcomeView(processing({}, 2400), safe)!;
    expect(v).toMatchObject({ tone: 'pending', pill: 'PROCESSING', title: 'Payment processing' });
    const countdown = v.lines[1].parts.find((p) => typeof p !== 'string');
    expect(countdown).toEqual({ text: '3 s', testid: 'next-poll', className: 'countdown' });
    expect(words(outcomeView(processing({ retryInMs: 0 }, 0), safe))).toContain('Checking now…');
  });

  it.each([
    [5000, '5 s'],
    [4001, '5 s'],
    [4000, '4 s'],
    [999, '1 s'],
    [1, '1 s'],
  ])('countdownText(%i) = %s', (ms, text) => {
    expect(countdownText(ms)).toBe(text);
  });

  it('says the request is still open for a slow bank', () => {
    expect(words(outcomeView(state(sending(), { slow: { key: 'key-1', checks: 1, retryAfterMs: 1000 } }), safe))).toContain('the request is still open');
  });

  it('live status: connecting, then subscribed, with no countdown; unavailable says so beside the countdown', () => {
    const connecting = outcomeView(processing({ live: 'ws', retryInMs: null }), safe)!;
    expect(words(connecting)).toContain('Connecting to the live status');
    expect(words(connecting)).not.toContain('Checking again');
    const subscribed = outcomeView(processing({ live: 'ws', liveOpen: true, retryInMs: 15_000 }), safe)!;
    expect(subscribed.lines[1]).toMatchObject({ testid: 'live-status' });
    expect(words(subscribed)).toContain('the server tells this page the moment the payment is final');
    const polling = outcomeView(processing({ live: 'poll', liveFailed: 'closed 1006' }, 2000), safe)!;
    expect(words(polling)).toContain('Live status unavailable. Checking again in');
    expect(polling.lines[1].parts.find((p) => typeof p !== 'string')).toMatchObject({ testid: 'next-poll' });
  });

  it('the live region does not tick with the countdown', () => {
    const a = announcement(processing({}, 3000), safe);
    const b = announcement(processing({ checks: 4 }, 1000), safe);
    expect(a).toBe('Payment processing.');
    expect(b).toBe(a);
  });
});

describe('the live region', () => {
  it('is one short sentence, never the facts', () => {
    const ctx = { ...safe, ledger: ledgerOf(1) };
    expect(announcement(state(settled(succeeded())), ctx)).toBe('Payment received.');
    expect(announcement(state(settled(declined)), ctx)).toBe('Payment declined: Your card was declined.');
    expect(announcement(state(settled(succeeded())), { ...unsafe, ledger: ledgerOf(2) })).toBe('Payment received, but the card was charged 2 times.');
    expect(announcement(state(idle), ctx)).toBe('');
    for (const s of [
      state(retrying('SERVICE_UNAVAILABLE', 1000)),
      state(unknown()),
      state(rejected('IDEMPOTENCY_KEY_REUSED', 'the same key with another input')),
      state(paused('offline')),
      state(paused('hidden')),
      resuming(),
      noSession('Failed to fetch', null),
      state(rejected('CHECKOUT_SESSION_EXPIRED', 'the session expired')),
    ]) {
      const text = announcement(s, ctx);
      expect(text.length).toBeGreaterThan(0);
      expect(text.length).toBeLessThanOrEqual(80);
      expect(text).not.toMatch(/ch_|provider charge|replayed/);
    }
  });
});

describe('a live status row in the timeline', () => {
  const row = (r: Partial<Parameters<typeof describeRequest>[0]>) =>
    describeRequest({ n: 2, operation: 'chargeUpdated', idempotencyKey: 'k', sentAt: '', outcome: 'pending', ...r });
  it('says which path the page took', () => {
    expect(row({})).toEqual({ text: 'live status: connecting…', tone: 'pending' });
    expect(row({ status: 'PROCESSING', detail: 'subscribed' })).toEqual({ text: 'live status: subscribed · PROCESSING', tone: 'pending' });
    expect(row({ outcome: 'answered', status: 'SUCCEEDED', detail: 'subscribed' })).toEqual({ text: 'live status: subscribed · SUCCEEDED', tone: 'ok' });
    expect(row({ outcome: 'unavailable', detail: 'closed 1006' })).toEqual({ text: 'live status unavailable: polling (closed 1006)', tone: 'warn' });
    expect(row({ outcome: 'closed', status: 'PROCESSING' }).text).toContain('closed, the outcome came first');
  });
});

describe('a timeline row', () => {
  it.each([
    [{ outcome: 'pending' }, 'waiting for the answer…', 'pending'],
    [{ outcome: 'network-error', fault: 'drop-response' }, 'network error: the response was lost after the server acted', 'error'],
    [{ outcome: 'graphql-error', detail: 'SERVICE_UNAVAILABLE', retryAfterMs: 2000 }, 'error SERVICE_UNAVAILABLE, retry after 2000 ms', 'warn'],
    [{ outcome: 'graphql-error', detail: 'IDEMPOTENCY_KEY_REUSED' }, 'error IDEMPOTENCY_KEY_REUSED', 'error'],
    [{ outcome: 'answered', status: 'PROCESSING' }, 'PROCESSING', 'pending'],
    [{ outcome: 'answered', status: 'SUCCEEDED', replayed: true }, 'SUCCEEDED · replayed: true', 'ok'],
    [{ outcome: 'answered', status: null }, 'unknown key: the server has no attempt with it (yet)', 'warn'],
  ] as const)('%j: %s', (r, text, tone) => {
    expect(describeRequest({ n: 1, operation: 'chargeCard', idempotencyKey: 'k', sentAt: '', ...r })).toEqual({ text, tone });
  });
});

describe('the bank asks the shopper to authenticate (action)', () => {
  const nextAction = { type: 'REDIRECT' as const, url: 'http://127.0.0.1/provider/authenticate/ch_1', expiresAt: '2099-01-01T00:15:00Z' };
  /** The charger following the attempt while the bank asks (live: the stream is open); leaving and back are the page's. */
  const action = (o: { leaving?: boolean; back?: boolean; live?: boolean } = {}) =>
    state(following({ attempt: { ...open, nextAction }, live: 'ws', liveOpen: o.live ?? false, retryInMs: null }), {
      leaving: o.leaving ?? false,
      backKey: o.back ? 'key-1' : null,
    });

  it('Authenticate stands in for Pay: Pay is hidden, Authenticate shown until the page leaves', () => {
    expect(payButtonView(action())).toMatchObject({ hidden: true, disabled: true, busy: false });
    expect(authenticateButtonView(action())).toEqual({ hidden: false, disabled: false, busy: false, label: 'Authenticate' });
    expect(authenticateButtonView(action({ leaving: true }))).toEqual({ hidden: false, disabled: true, busy: true, label: 'Going to your bank…' });
    expect(authenticateButtonView(action({ back: true }))).toMatchObject({ hidden: false, label: 'Authenticate again' });
    for (const s of [state(idle), processing(), state(settled(succeeded()))]) {
      expect(authenticateButtonView(s).hidden).toBe(true);
    }
    // Back from the bank with another key than the one asked about now: not this attempt's return.
    const other = state(following({ attempt: { ...open, nextAction } }), { backKey: 'another' });
    expect(authenticateButtonView(other).label).toBe('Authenticate');
    expect(newAttemptLabel(action())).toBeNull();
    expect(lockedNote(action(), safe)).toContain('under the same key');
  });

  it('says what to do, that nothing is charged until then nor twice after, and until when', () => {
    const v = outcomeView(action(), safe)!;
    expect(v).toMatchObject({ tone: 'pending', pill: 'PROCESSING', title: 'Confirm the payment with your bank', spinner: false });
    expect(words(v)).toContain('authenticate this payment of $113.00 (3-D Secure)');
    expect(words(v)).toContain('Nothing is charged until you do, and never twice');
    expect(words(v)).toContain('coming back only reads how it ended');
    const deadline = v.lines.flatMap((l) => l.parts).find((p) => typeof p !== 'string' && p.testid === 'action-expires');
    expect(deadline).toEqual({ text: deadlineText('2099-01-01T00:15:00Z'), testid: 'action-expires' });
    expect(deadlineText('2099-01-01T00:15:00Z')).toMatch(/^\d{1,2}:\d{2}\s?[AP]M$/);
    expect(words(outcomeView(action({ live: true }), safe))).toContain('this page hears it at once');
  });

  it('on the way to the bank, and back from it before its word', () => {
    expect(outcomeView(action({ leaving: true }), safe)).toMatchObject({ title: 'Going to your bank…', spinner: true });
    const back = outcomeView(action({ back: true }), safe)!;
    expect(back).toMatchObject({ title: 'Back from your bank: waiting for its answer', spinner: true });
    expect(words(back)).toContain('a read, which never charges');
    const reading = outcomeView(resuming({ backKey: 'key-1' }), safe)!;
    expect(reading).toMatchObject({ title: 'Back from your bank: reading the outcome…', spinner: true });
  });

  it('the live region: one short sentence for each step', () => {
    expect(announcement(action(), safe)).toBe('Your bank asks you to authenticate this payment.');
    expect(announcement(action({ leaving: true }), safe)).toBe('Going to your bank.');
    expect(announcement(action({ back: true }), safe)).toBe('Back from your bank. Waiting for its answer.');
    expect(announcement(resuming({ backKey: 'key-1' }), safe)).toBe('Back from your bank. Reading the outcome.');
  });

  it.each([
    ['authentication_failed', 'Authentication failed'],
    ['authentication_abandoned', 'Payment cancelled: not authenticated in time'],
    ['card_declined', 'Payment declined'],
  ])('FAILED %s: %s, and nothing was charged', (code, title) => {
    const s = state(settled({ ...declined, failure: { code, message: 'The bank said no.' } }));
    const v = outcomeView(s, safe)!;
    expect(v).toMatchObject({ tone: 'error', pill: 'FAILED', title });
    expect(words(v)).toContain('Nothing was charged');
    expect(announcement(s, safe)).toBe(`${title}: The bank said no.`);
    expect(newAttemptLabel(s)).toBe('Try another card');
  });

  it('the timeline: the PROCESSING answer with its nextAction, the redirect, and the return by where it found the key', () => {
    const row = (r: Partial<Parameters<typeof describeRequest>[0]>) =>
      describeRequest({ n: 1, operation: 'chargeCard', idempotencyKey: 'k', sentAt: '', outcome: 'answered', ...r });
    expect(row({ status: 'PROCESSING', nextAction: 'REDIRECT' })).toEqual({
      text: 'PROCESSING · nextAction REDIRECT: the bank asks the shopper to authenticate',
      tone: 'pending',
    });
    expect(row({ operation: 'redirect', outcome: 'navigated', detail: 'http://x' }).text).toContain("to the bank's challenge page");
    expect(row({ operation: 'return', outcome: 'returned', detail: 'storage' }).text).toContain("the attempt from this tab's storage");
    expect(row({ operation: 'return', outcome: 'returned', detail: 'address' })).toEqual({
      text: "back from the bank: this tab's storage lost the attempt; its key from chargeonce_key, only asked about",
      tone: 'warn',
    });
    expect(row({ operation: 'chargeUpdated', outcome: 'abandoned', detail: 'the page went to the bank' }).text).toBe(
      'live status: ended, the page went to the bank',
    );
  });
});
