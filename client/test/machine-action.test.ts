// step() for customer authentication (3-D Secure): PROCESSING with a
// nextAction is followed as any PROCESSING is, with the nextAction on the
// attempt, never sent again; handleNextAction() takes the shopper to the bank; the return
// resumes the key from storage, or, when storage lost it, adopts the key
// from the address and only ever asks chargeStatus.
import { describe, expect, it } from 'vitest';
import { machineDefaults, step } from '../src/machine.js';
import type { Effect, MachineConfig, MachineEvent } from '../src/machine-types.js';
import type { AttemptRecord } from '../src/record.js';
import type { Answer } from '../src/transport.js';
import { chargeOf } from './fakes.js';
import type { ChargePayload, ChargerFlags, ChargerState, FollowingState, NextAction, SendingState } from '../src/types.js';

const input = { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_1' };
const other = { paymentMethod: 'pm_card_mastercard', checkoutSession: 'cs_1' };
const K = 'key-1';
const T0 = 1_000_000;
const sse: MachineConfig = { ...machineDefaults, retry: { baseMs: 400, capMs: 10_000, budgetMs: 45_000, maxAttempts: 8 } };
const poll: MachineConfig = { ...sse, live: 'poll' };

const nextAction: NextAction = { type: 'REDIRECT', url: 'https://bank.example/challenge/1', expiresAt: '2099-01-01T00:10:00Z' };
const charge = chargeOf('1', null);
const payload = (status: ChargePayload['status'], extra: Partial<ChargePayload> = {}): ChargePayload => ({
  idempotencyKey: K,
  status,
  replayed: false,
  ...(status === 'SUCCEEDED' ? { charge } : {}),
  ...(status === 'FAILED' ? { failure: { code: 'authentication_failed', message: 'The shopper did not authenticate.' } } : {}),
  ...extra,
});
const challenge = (extra: Partial<ChargePayload> = {}) => payload('PROCESSING', { retryAfterMs: 1000, nextAction: { ...nextAction }, ...extra });
const ok = (p: ChargePayload | null): Answer => ({ kind: 'payload', payload: p, http: 200 });
const lost: Answer = { kind: 'lost', reason: 'Failed to fetch' };

const flags: ChargerFlags = { offline: false, hidden: false, follower: false };
const follower: ChargerFlags = { ...flags, follower: true };
const idle: ChargerState = { kind: 'idle', flags, paused: false };
const sending: SendingState = { kind: 'sending', attempt: { key: K, input, sends: 1 }, run: { since: T0, tries: 1 }, flags, paused: false };
const processingPoll: FollowingState = { kind: 'following', attempt: { key: K, input, sends: 1 }, live: 'poll', liveOpen: false, pollMs: 1000, checks: 0, retryInMs: null, flags, paused: false };
const processingSse: FollowingState = { ...processingPoll, live: 'sse', liveOpen: true };
/** Following while the shopper must authenticate: the attempt has a nextAction (the state 0.1 called action). */
const actionPoll: FollowingState = { ...processingPoll, attempt: { key: K, input, sends: 1, nextAction } };
const actionSse: FollowingState = { ...actionPoll, live: 'sse', liveOpen: true };
const actionConnecting: FollowingState = { ...actionPoll, live: 'sse', liveOpen: false };
const actionPaused: FollowingState = { ...actionPoll, retryInMs: null, flags: { ...flags, offline: true }, paused: true };
/** A key adopted from the return address: no input. */
const adopted: FollowingState = { ...processingPoll, attempt: { key: K, input: null, sends: 0 } };
const adoptedAction: FollowingState = { ...adopted, attempt: { ...adopted.attempt, nextAction } };
const openRecord: AttemptRecord = { v: 1, key: K, scope: 'cs_1', input, createdAt: T0 - 5000, status: 'open', nextAction };

const types = (fx: Effect[]) => fx.map((f) => f.type);
const find = <T extends Effect['type']>(fx: Effect[], t: T) => fx.find((f) => f.type === t) as Extract<Effect, { type: T }> | undefined;
const status = (p: ChargePayload | null): MachineEvent => ({ type: 'StatusAnswered', answer: ok(p), now: T0, jitter: 0 });
const live = (p: ChargePayload): MachineEvent => ({ type: 'LiveNext', payload: p, now: T0 });
const resume = (record: AttemptRecord | null, returnKey?: string): MachineEvent => ({ type: 'Resume', record, leader: true, now: T0, ...(returnKey ? { returnKey } : {}) });

describe('step: asked to authenticate', () => {
  it.each([
    ['chargeCard, followed over the stream', sending, { type: 'Answered', answer: ok(challenge()), now: T0, jitter: 0 } as MachineEvent, sse],
    ['chargeCard, polled', sending, { type: 'Answered', answer: ok(challenge()), now: T0, jitter: 0 } as MachineEvent, poll],
    ['chargeStatus', processingPoll, status(challenge()), poll],
    ['the live stream', processingSse, live(challenge()), sse],
  ])('PROCESSING with nextAction from %s is followed with it: persisted open with it, announced, never sent', (_, s, e, c) => {
    const { state, effects } = step(s, e, c);
    expect(state).toMatchObject({ kind: 'following', attempt: { key: K, input, nextAction } });
    expect(find(effects, 'Persist')!.record).toMatchObject({ key: K, input, status: 'open', nextAction });
    expect(find(effects, 'Emit')!.event).toEqual({ type: 'action', key: K, url: nextAction.url });
    expect(find(effects, 'Broadcast')!.progress).toBe(state);
    expect(find(effects, 'Send')).toBeUndefined();
    expect(types(effects).indexOf('Persist')).toBeLessThan(types(effects).indexOf('Emit'));
  });

  it('from chargeCard it is followed exactly as any PROCESSING: the stream, with the connect timer', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(challenge()), now: T0, jitter: 0 }, sse);
    expect(state).toMatchObject({ kind: 'following', live: 'sse', liveOpen: false, pollMs: 1000, checks: 0 });
    expect(find(effects, 'Subscribe')).toEqual({ type: 'Subscribe', key: K, mode: 'sse' });
    expect(find(effects, 'SetTimer')!.ms).toBe(sse.liveConnectMs);
  });

  it('polled, it asks at the server\'s retryAfterMs', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(challenge({ retryAfterMs: 1000 })), now: T0, jitter: 0 }, poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { nextAction }, live: 'poll', retryInMs: 1000 });
    expect(find(effects, 'SetTimer')!.ms).toBe(1000);
  });

  it('the first word on a connecting stream opens it and sets the nextAction', () => {
    const { state, effects } = step({ ...processingSse, liveOpen: false }, live(challenge()), sse);
    expect(state).toMatchObject({ kind: 'following', liveOpen: true, attempt: { nextAction } });
    expect(types(effects)).toEqual(['Persist', 'Emit', 'SetTimer', 'Broadcast']);
  });
});

describe('step: following while the shopper authenticates', () => {
  it('the same nextAction again changes nothing: no write, no event, no word to the tabs; only the next check', () => {
    const { state, effects } = step(actionPoll, status(challenge()), poll);
    expect(state).toMatchObject({ kind: 'following', checks: 1 });
    expect(state.kind === 'following' && state.attempt.nextAction).toBe(actionPoll.attempt.nextAction);
    expect(effects).toEqual([{ type: 'SetTimer', ms: 1000 }]);
  });

  it('the same nextAction over an open stream is no change at all', () => {
    expect(step(actionSse, live(challenge()), sse)).toEqual({ state: actionSse, effects: [] });
  });

  it('polling slows down after five checks, as without a nextAction', () => {
    const { effects } = step({ ...actionPoll, checks: 5 }, status(challenge()), poll); // the sixth check: twice the pace
    expect(effects).toEqual([{ type: 'SetTimer', ms: 4000 }]);
  });

  it('a new nextAction is persisted and announced', () => {
    const again = { ...nextAction, url: 'https://bank.example/challenge/2' };
    const { state, effects } = step(actionPoll, status(challenge({ nextAction: again })), poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { nextAction: again } });
    expect(find(effects, 'Persist')!.record.nextAction).toEqual(again);
    expect(find(effects, 'Emit')!.event).toEqual({ type: 'action', key: K, url: again.url });
  });

  it.each([
    ['chargeStatus', actionPoll, status(payload('PROCESSING', { retryAfterMs: 1000 })), poll],
    ['the live stream', actionSse, live(payload('PROCESSING')), sse],
  ])('PROCESSING without nextAction from %s goes on following without it: persisted without it, no event', (_, s, e, c) => {
    const { state, effects } = step(s, e, c);
    expect(state.kind).toBe('following');
    expect(state.kind === 'following' && state.attempt.nextAction).toBeUndefined();
    const record = find(effects, 'Persist')!.record;
    expect(record).toMatchObject({ key: K, status: 'open' });
    expect(record.nextAction).toBeUndefined();
    expect(find(effects, 'Emit')).toBeUndefined();
    expect(find(effects, 'Broadcast')!.progress).toBe(state);
  });

  it.each([
    ['SUCCEEDED by chargeStatus', actionPoll, status(payload('SUCCEEDED', { expiresAt: '2026-01-02T00:00:00Z' })), 'SUCCEEDED'],
    ['authentication_failed by chargeStatus', actionPoll, status(payload('FAILED')), 'FAILED'],
    ['authentication_abandoned over the stream', actionSse, live(payload('FAILED', { failure: { code: 'authentication_abandoned', message: 'expired' } })), 'FAILED'],
    ['SUCCEEDED while paused', actionPaused, status(payload('SUCCEEDED')), 'SUCCEEDED'],
  ])('a final payload settles it: %s', (_, s, e, outcome) => {
    const { state, effects } = step(s, e, sse);
    expect(state).toMatchObject({ kind: 'settled', outcome: { status: outcome, key: K } });
    expect(state.kind === 'settled' && state.attempt.nextAction).toBeUndefined();
    expect(types(effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Persist', 'Settle', 'Broadcast']);
    const record = find(effects, 'Persist')!.record;
    expect(record.status).toBe('settled');
    expect(record.nextAction).toBeUndefined();
  });

  it('a FAILED authentication is an outcome, like a decline', () => {
    const { effects } = step(actionPoll, status(payload('FAILED')), poll);
    expect(find(effects, 'Settle')!.result).toEqual({
      ok: { status: 'FAILED', key: K, failure: { code: 'authentication_failed', message: 'The shopper did not authenticate.' }, replayed: false },
    });
  });

  it('TimerFired asks chargeStatus; a stream that said nothing in time is dropped for polling', () => {
    expect(step(actionPoll, { type: 'TimerFired', now: T0 }, poll).effects).toEqual([{ type: 'AskStatus', key: K }]);
    const { state, effects } = step(actionConnecting, { type: 'TimerFired', now: T0 + 3000 }, sse);
    expect(state).toMatchObject({ kind: 'following', attempt: { nextAction }, live: 'poll' });
    expect(effects).toEqual([{ type: 'Unsubscribe' }, { type: 'AskStatus', key: K }]);
  });

  it('LiveFailed falls back to polling at the server\'s pace', () => {
    const { state, effects } = step(actionSse, { type: 'LiveFailed', reason: 'HTTP 502', now: T0 }, sse);
    expect(state).toMatchObject({ kind: 'following', attempt: { nextAction }, live: 'poll', retryInMs: 1000 });
    expect(effects).toEqual([{ type: 'Unsubscribe' }, { type: 'SetTimer', ms: 1000 }]);
  });

  it('a lost chargeStatus keeps asking', () => {
    const { state, effects } = step(actionPoll, { type: 'StatusAnswered', answer: lost, now: T0, jitter: 0 }, poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { nextAction } });
    expect(types(effects)).toEqual(['SetTimer']);
  });

  it('chargeStatus null (the server forgot a key it asked to authenticate) is unknown, never chargeCard', () => {
    const { state, effects } = step(actionPoll, status(null), poll);
    expect(state.kind).toBe('unknown');
    expect(find(effects, 'Send')).toBeUndefined();
  });

  it('past the result\'s expiresAt without an answer: unknown', () => {
    const { state } = step({ ...actionPoll, attempt: { ...actionPoll.attempt, expiresAt: new Date(T0 - 1).toISOString() } }, { type: 'TimerFired', now: T0 }, poll);
    expect(state.kind).toBe('unknown');
  });

  it.each<[string, ChargerState, MachineEvent]>([
    ['TimerFired', actionPoll, { type: 'TimerFired', now: T0 }],
    ['TimerFired on a silent stream', actionConnecting, { type: 'TimerFired', now: T0 + 3000 }],
    ['StatusAnswered PROCESSING', actionPoll, status(challenge())],
    ['StatusAnswered null', actionPoll, status(null)],
    ['StatusAnswered lost', actionPoll, { type: 'StatusAnswered', answer: lost, now: T0, jitter: 0 }],
    ['StatusAnswered SERVICE_UNAVAILABLE', actionPoll, { type: 'StatusAnswered', answer: { kind: 'error', error: { code: 'SERVICE_UNAVAILABLE', message: 'x' }, retryable: true, http: 503 }, now: T0, jitter: 0 }],
    ['Answered (a late chargeCard answer)', actionPoll, { type: 'Answered', answer: lost, now: T0, jitter: 0 }],
    ['LiveNext', actionSse, live(challenge())],
    ['LiveFailed', actionSse, { type: 'LiveFailed', reason: 'x', now: T0 }],
    ['Online', actionPoll, { type: 'Online', now: T0 }],
    ['Visible', actionPoll, { type: 'Visible', now: T0 }],
    ['Offline', actionSse, { type: 'Offline', now: T0 }],
    ['Hidden', actionPoll, { type: 'Hidden', now: T0 }],
    ['Pay, the same input', actionPoll, { type: 'Pay', input, key: 'fresh', record: openRecord, leader: true, now: T0 }],
    ['Pay, another input', actionPoll, { type: 'Pay', input: other, key: 'fresh', record: openRecord, leader: true, now: T0 }],
    ['Resume', actionPoll, resume(openRecord)],
    ['Reset', actionPoll, { type: 'Reset' }],
    ['Abort', actionPoll, { type: 'Abort' }],
    ['HandleNextAction', actionPoll, { type: 'HandleNextAction', record: openRecord }],
    ['Leader', { ...actionPoll, flags: follower }, { type: 'Leader', key: 'fresh', record: openRecord, now: T0 }],
  ])('%s while the shopper authenticates never sends chargeCard', (_, s, e) => {
    expect(find(step(s, e, sse).effects, 'Send')).toBeUndefined();
  });

  it('Pay with the same input waits for the outcome: no new key, no request', () => {
    const { state, effects } = step(actionPoll, { type: 'Pay', input, key: 'fresh', record: openRecord, leader: true, now: T0 }, poll);
    expect(state).toBe(actionPoll);
    expect(effects).toEqual([]);
  });

  it('Pay with another input is refused with the open key', () => {
    const { effects } = step(actionPoll, { type: 'Pay', input: other, key: 'fresh', record: openRecord, leader: true, now: T0 }, poll);
    expect(effects).toEqual([{ type: 'Reply', result: { error: { type: 'open', key: K } } }]);
  });

  it('Resume waits for it', () => {
    expect(step(actionPoll, resume(openRecord), poll)).toEqual({ state: actionPoll, effects: [] });
  });

  it('Reset is refused: a new key now could charge twice', () => {
    const { state, effects } = step(actionPoll, { type: 'Reset' }, poll);
    expect(state).toBe(actionPoll);
    expect(effects).toEqual([{ type: 'Reply', result: { error: { type: 'state', state: 'following', message: `attempt ${K} is following: resume() it` } } }]);
  });
});

describe('step: authenticating, offline and hidden', () => {
  it('Offline pauses it (the stream closed); Online unpauses it and asks at once', () => {
    const paused = step(actionSse, { type: 'Offline', now: T0 }, sse);
    expect(paused.state).toMatchObject({ kind: 'following', paused: true, flags: { offline: true }, attempt: { nextAction } });
    expect(find(paused.effects, 'Emit')!.event).toEqual({ type: 'pause', key: K, reason: 'offline' });
    expect(types(paused.effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Emit', 'Broadcast']);
    const back = step(paused.state, { type: 'Online', now: T0 + 10 }, sse);
    expect(back.state).toEqual({ ...actionSse, liveOpen: false, retryInMs: 0 });
    expect(types(back.effects)).toEqual(['Emit', 'AskStatus', 'Subscribe', 'Broadcast']);
  });

  it('Hidden while polling pauses it; Visible unpauses it and asks at once', () => {
    const paused = step(actionPoll, { type: 'Hidden', now: T0 }, poll);
    expect(paused.state).toMatchObject({ kind: 'following', paused: true, flags: { hidden: true }, attempt: { nextAction } });
    expect(find(paused.effects, 'Emit')!.event).toEqual({ type: 'pause', key: K, reason: 'hidden' });
    const back = step(paused.state, { type: 'Visible', now: T0 + 10 }, poll);
    expect(back.state).toMatchObject({ kind: 'following', paused: false, attempt: { nextAction }, live: 'poll' });
    expect(find(back.effects, 'AskStatus')).toEqual({ type: 'AskStatus', key: K });
  });

  it('Hidden with the stream open keeps following', () => {
    expect(step(actionSse, { type: 'Hidden', now: T0 }, sse).state).toMatchObject({ kind: 'following', paused: false, attempt: { nextAction } });
  });

  it('Visible while authenticating (timers throttled while hidden) asks at once', () => {
    expect(step(actionPoll, { type: 'Visible', now: T0 }, poll).effects).toEqual([{ type: 'ClearTimer' }, { type: 'AskStatus', key: K }]);
  });

  it('a PROCESSING answer while paused waits for the wake-up', () => {
    expect(step(actionPaused, status(challenge()), poll).effects).toEqual([]);
  });
});

describe('step: handleNextAction', () => {
  it('with a nextAction: navigates to its url, the attempt already in storage', () => {
    const { state, effects } = step(actionPoll, { type: 'HandleNextAction', record: openRecord }, poll);
    expect(state).toBe(actionPoll);
    expect(effects).toEqual([{ type: 'Navigate', url: nextAction.url }, { type: 'Reply', result: { ok: null } }]);
  });

  it('with a nextAction shown from another tab: persisted in this tab\'s storage first, then navigates', () => {
    const { effects } = step({ ...actionPoll, flags: follower }, { type: 'HandleNextAction', record: null }, poll);
    expect(types(effects)).toEqual(['Persist', 'Navigate', 'Reply']);
    expect(find(effects, 'Persist')!.record).toMatchObject({ key: K, input, status: 'open', nextAction });
  });

  it.each<[string, ChargerState, string]>([
    ['idle', idle, 'idle'],
    ['sending', sending, 'sending'],
    ['sending after a reload, nextAction still shown', { ...sending, attempt: { ...sending.attempt, nextAction } }, 'sending'],
    ['following without a nextAction', processingPoll, 'following without a nextAction'],
    ['following with a nextAction, paused', actionPaused, 'following, paused'],
    ['unknown', { kind: 'unknown', attempt: { key: K, input, sends: 1 }, flags, paused: false }, 'unknown'],
    ['settled', { kind: 'settled', attempt: { key: K, input, sends: 1 }, outcome: { status: 'SUCCEEDED', key: K, charge, replayed: false }, flags, paused: false }, 'settled'],
  ])('in %s it is refused, and goes nowhere', (_, s, where) => {
    const { state, effects } = step(s, { type: 'HandleNextAction', record: openRecord }, poll);
    expect(state).toBe(s);
    expect(effects).toEqual([
      { type: 'Reply', result: { error: { type: 'state', state: s.kind, message: `handleNextAction() needs a nextAction to follow (the shopper must authenticate); the charger is ${where}` } } },
    ]);
  });
});

describe('step: the return from the bank', () => {
  it('an open record with nextAction is sent again with its own key and input (the server reads the provider), showing nextAction meanwhile', () => {
    const { state, effects } = step(idle, resume(openRecord, K), poll);
    expect(state).toMatchObject({ kind: 'sending', attempt: { key: K, input, nextAction, sends: 1 } });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, try: 1 });
  });

  it('the record wins over the address: its key, never another', () => {
    const { effects } = step(idle, resume(openRecord, 'some-other-key'), poll);
    expect(find(effects, 'Send')).toMatchObject({ key: K });
    expect(find(effects, 'AskStatus')).toBeUndefined();
  });

  it('Pay after a reload, the same input: the same key, nextAction shown', () => {
    const { state, effects } = step(idle, { type: 'Pay', input, key: 'fresh', record: openRecord, leader: true, now: T0 }, poll);
    expect(state).toMatchObject({ kind: 'sending', attempt: { key: K, nextAction } });
    expect(find(effects, 'Send')).toMatchObject({ key: K, input });
  });

  it.each([
    ['SUCCEEDED settles, without nextAction', payload('SUCCEEDED'), 'settled', false],
    ['PROCESSING with the same nextAction (not authenticated yet) is followed with it again', challenge(), 'following', true],
    ['PROCESSING without it (authenticated, the provider finishing) is followed without it', payload('PROCESSING'), 'following', false],
  ])('the resent chargeCard\'s answer: %s', (_, p, kind, asking) => {
    const sent = step(idle, resume(openRecord), poll).state;
    const { state, effects } = step(sent, { type: 'Answered', answer: ok(p), now: T0, jitter: 0 }, poll);
    expect(state.kind).toBe(kind);
    expect(state.kind !== 'idle' && state.attempt.nextAction).toEqual(asking ? nextAction : undefined);
    expect(find(effects, 'Emit')?.event.type).toBe(asking ? 'action' : undefined);
  });

  it('a lost answer to the resent chargeCard retries the same key, nextAction still shown', () => {
    const sent = step(idle, resume(openRecord), poll).state;
    const { state } = step(sent, { type: 'Answered', answer: lost, now: T0, jitter: 0.5 }, poll);
    expect(state).toMatchObject({ kind: 'retrying', attempt: { key: K, nextAction } });
  });

  it('an error that is an answer rejects it, without nextAction', () => {
    const sent = step(idle, resume(openRecord), poll).state;
    const answer: Answer = { kind: 'error', error: { code: 'CHECKOUT_SESSION_EXPIRED', message: 'x' }, retryable: false, http: 200 };
    const { state } = step(sent, { type: 'Answered', answer, now: T0, jitter: 0 }, poll);
    expect(state.kind).toBe('rejected');
    expect(state.kind === 'rejected' && state.attempt.nextAction).toBeUndefined();
  });

  it('an open record with nextAction past the result\'s expiresAt is only asked about, and keeps its nextAction', () => {
    const rec = { ...openRecord, expiresAt: new Date(T0 - 1000).toISOString() };
    const { state, effects } = step(idle, resume(rec), poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { nextAction }, live: 'poll' });
    expect(types(effects)).toEqual(['Persist', 'AskStatus', 'Broadcast']);
  });
});

describe('step: a key adopted from the return address (storage lost it)', () => {
  it('Resume with no record and chargeonce_key asks chargeStatus about that key, with no input', () => {
    const { state, effects } = step({ ...idle, flags: { ...flags, hidden: true } }, resume(null, K), poll);
    expect(state).toEqual({ ...adopted, pollMs: poll.pollMs, flags: { ...flags, hidden: true } });
    expect(types(effects)).toEqual(['AskStatus', 'Broadcast']);
    expect(find(effects, 'AskStatus')).toEqual({ type: 'AskStatus', key: K });
  });

  it('Resume with neither resolves null', () => {
    expect(step(idle, resume(null), poll).effects).toEqual([{ type: 'Reply', result: { ok: null } }]);
  });

  it('PROCESSING with nextAction: followed with it, announced, nothing persisted (there is no input to keep)', () => {
    const { state, effects } = step(adopted, status(challenge()), poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { key: K, nextAction, input: null } });
    expect(types(effects)).toEqual(['Emit', 'SetTimer', 'Broadcast']);
  });

  it('PROCESSING without nextAction: followed, polled', () => {
    const { state, effects } = step(adopted, status(payload('PROCESSING', { retryAfterMs: 1000 })), poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { input: null } });
    expect(state.kind === 'following' && state.attempt.nextAction).toBeUndefined();
    expect(effects).toEqual([{ type: 'SetTimer', ms: 1000 }]);
  });

  it('a final answer settles it, unpersisted', () => {
    const { state, effects } = step(adoptedAction, status(payload('SUCCEEDED')), poll);
    expect(state).toMatchObject({ kind: 'settled', attempt: { key: K, input: null }, outcome: { status: 'SUCCEEDED', key: K } });
    expect(types(effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Settle', 'Broadcast']);
  });

  it('chargeStatus null (not this session\'s key): idle, resume() resolves null, nothing sent', () => {
    const { state, effects } = step(adopted, status(null), poll);
    expect(state).toEqual(idle);
    expect(effects).toEqual([{ type: 'ClearTimer' }, { type: 'Unsubscribe' }, { type: 'Settle', result: { ok: null } }]);
  });

  it('Resume in unknown asks again, never chargeCard', () => {
    const { state, effects } = step({ kind: 'unknown', attempt: { key: K, input: null, sends: 0 }, flags, paused: false }, resume(null, K), poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { key: K, input: null } });
    expect(types(effects)).toEqual(['AskStatus', 'Broadcast']);
  });

  it.each<[string, ChargerState]>([
    ['following', adopted],
    ['following with a nextAction', adoptedAction],
    ['unknown', { kind: 'unknown', attempt: { key: K, input: null, sends: 0 }, flags, paused: false }],
  ])('Pay in %s is refused with the key: its input is not known, so no input is its own', (_, s) => {
    expect(step(s, { type: 'Pay', input, key: 'fresh', record: null, leader: true, now: T0 }, poll).effects).toEqual([
      { type: 'Reply', result: { error: { type: 'open', key: K } } },
    ]);
  });

  it('Pay once it settled asks for reset() first', () => {
    const settled: ChargerState = { kind: 'settled', attempt: { key: K, input: null, sends: 0 }, outcome: { status: 'SUCCEEDED', key: K, charge, replayed: false }, flags, paused: false };
    const { effects } = step(settled, { type: 'Pay', input, key: 'fresh', record: null, leader: true, now: T0 }, poll);
    expect(effects[0]).toMatchObject({ type: 'Reply', result: { error: { type: 'state', state: 'settled' } } });
  });

  it('handleNextAction with its nextAction navigates again, persisting nothing', () => {
    const { effects } = step(adoptedAction, { type: 'HandleNextAction', record: null }, poll);
    expect(effects).toEqual([{ type: 'Navigate', url: nextAction.url }, { type: 'Reply', result: { ok: null } }]);
  });

  it('another tab ignores its progress: without an input it is not an attempt to share', () => {
    const { state } = step(idle, { type: 'RemoteProgress', progress: adoptedAction, now: T0 }, poll);
    expect(state).toEqual(idle);
  });
});

describe('step: authentication and other tabs', () => {
  it('an idle tab shows another tab\'s attempt waiting for the shopper, with its nextAction, and keeps waiting', () => {
    const { state, effects } = step(idle, { type: 'RemoteProgress', progress: actionSse, now: T0 }, poll);
    expect(state).toEqual({ ...actionSse, flags: follower });
    expect(effects).toEqual([]);
  });

  it('a follower waiting on the same input shows the nextAction, then settles with the sender', () => {
    const waiting: ChargerState = { kind: 'idle', waiting: input, flags: follower, paused: false };
    const shown = step(waiting, { type: 'RemoteProgress', progress: actionSse, now: T0 }, poll);
    expect(shown.state).toMatchObject({ kind: 'following', attempt: { nextAction }, flags: { follower: true } });
    expect(shown.effects).toEqual([]);
    const outcome = { status: 'SUCCEEDED' as const, key: K, charge, replayed: false };
    const settled: ChargerState = { kind: 'settled', attempt: { key: K, input, sends: 1 }, outcome, flags, paused: false };
    const done = step(shown.state, { type: 'RemoteProgress', progress: settled, now: T0 }, poll);
    expect(done.effects).toEqual([{ type: 'Settle', result: { ok: outcome } }]);
  });

  it('a follower shown a nextAction that gets the lock asks chargeStatus and keeps it: never chargeCard', () => {
    const shown: ChargerState = { ...actionSse, flags: follower };
    const { state, effects } = step(shown, { type: 'Leader', key: 'fresh', record: openRecord, now: T0 }, poll);
    expect(state).toMatchObject({ kind: 'following', attempt: { key: K, nextAction }, live: 'poll' });
    expect(state.flags.follower).toBe(false);
    expect(types(effects)).toEqual(['Persist', 'AskStatus', 'Broadcast']);
  });
});
