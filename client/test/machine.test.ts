import { describe, expect, it } from 'vitest';
import { pollDelay } from '../src/following.js';
import { machineDefaults, step } from '../src/machine.js';
import type { Effect, MachineConfig, MachineEvent } from '../src/machine-types.js';
import type { AttemptRecord } from '../src/record.js';
import type { Answer } from '../src/transport.js';
import { chargeOf } from './fakes.js';
import type { ChargePayload, ChargerFlags, ChargerState, FollowingState, RetryingState, SendingState } from '../src/types.js';

const input = { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_1' };
const other = { paymentMethod: 'pm_card_mastercard', checkoutSession: 'cs_1' };
const K = 'key-1';
const T0 = 1_000_000;
const cfg: MachineConfig = { ...machineDefaults, retry: { baseMs: 400, capMs: 10_000, budgetMs: 45_000, maxAttempts: 8 } };
const poll: MachineConfig = { ...cfg, live: 'poll' };

const charge = chargeOf('1', null);
const payload = (status: ChargePayload['status'], extra: Partial<ChargePayload> = {}): ChargePayload => ({
  idempotencyKey: K,
  status,
  replayed: false,
  ...(status === 'SUCCEEDED' ? { charge } : {}),
  ...(status === 'FAILED' ? { failure: { code: 'card_declined', message: 'declined' } } : {}),
  ...extra,
});
const ok = (p: ChargePayload | null): Answer => ({ kind: 'payload', payload: p, http: 200 });
const err = (code: string, retryable: boolean, hintMs?: number): Answer => ({
  kind: 'error',
  error: { code, message: code },
  retryable,
  http: 200,
  ...(hintMs !== undefined ? { hintMs } : {}),
});
const lost: Answer = { kind: 'lost', reason: 'Failed to fetch' };

const flags: ChargerFlags = { offline: false, hidden: false, follower: false };
const follower: ChargerFlags = { ...flags, follower: true };
const idle: ChargerState = { kind: 'idle', flags, paused: false };
const sending: SendingState = { kind: 'sending', attempt: { key: K, input, sends: 1 }, run: { since: T0, tries: 1 }, flags, paused: false };
const retrying: RetryingState = { kind: 'retrying', attempt: { key: K, input, sends: 1 }, run: { since: T0, tries: 1 }, retryInMs: 200, cause: 'network', flags, paused: false };
const processingPoll: FollowingState = { kind: 'following', attempt: { key: K, input, sends: 1 }, live: 'poll', liveOpen: false, pollMs: 800, checks: 0, retryInMs: null, flags, paused: false };
const processingSse: FollowingState = { ...processingPoll, live: 'sse' };
const outcome = { status: 'SUCCEEDED' as const, key: K, charge, replayed: false };
const settled: ChargerState = { kind: 'settled', attempt: { key: K, input, sends: 1 }, outcome, flags, paused: false };
const rejected: ChargerState = { kind: 'rejected', attempt: { key: K, input, sends: 1 }, error: { code: 'BAD_USER_INPUT', message: 'bad' }, flags, paused: false };
const unknown: ChargerState = { kind: 'unknown', attempt: { key: K, input, sends: 8 }, flags, paused: false };
const openRecord: AttemptRecord = { v: 1, key: K, scope: 'cs_1', input, createdAt: T0 - 5000, status: 'open' };

const types = (fx: Effect[]) => fx.map((f) => f.type);
const find = <T extends Effect['type']>(fx: Effect[], t: T) => fx.find((f) => f.type === t) as Extract<Effect, { type: T }> | undefined;
const payEvent = (over: Partial<Extract<MachineEvent, { type: 'Pay' }>> = {}): MachineEvent => ({
  type: 'Pay',
  input,
  key: K,
  record: null,
  leader: true,
  now: T0,
  ...over,
});

describe('step: paying', () => {
  it('Pay in idle persists the new key, then sends it', () => {
    const { state, effects } = step(idle, payEvent(), cfg);
    expect(state).toEqual({ kind: 'sending', attempt: { key: K, input, sends: 1 }, run: { since: T0, tries: 1 }, flags, paused: false });
    expect(types(effects).slice(0, 2)).toEqual(['Persist', 'Send']);
    expect(find(effects, 'Persist')!.record).toMatchObject({ key: K, status: 'open', input });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, try: 1 });
    expect(find(effects, 'Broadcast')!.progress).toBe(state); // the other tabs hear this state
  });

  it.each([
    ['sending', sending],
    ['retrying', retrying],
    ['processing', processingPoll],
    ['retrying, paused', { ...retrying, retryInMs: null, flags: { ...flags, offline: true }, paused: true } as ChargerState],
  ])('Pay with the same input in %s waits for the open attempt, no new key, no request', (_, s) => {
    const { state, effects } = step(s, payEvent({ key: 'fresh' }), cfg);
    expect(state).toBe(s);
    expect(effects).toEqual([]);
  });

  it.each([
    ['sending', sending],
    ['processing', processingPoll],
    ['unknown', unknown],
  ])('Pay with another input in %s is refused with the open key', (_, s) => {
    const { state, effects } = step(s, payEvent({ input: other, key: 'fresh' }), cfg);
    expect(state).toBe(s);
    expect(effects).toEqual([{ type: 'Reply', result: { error: { type: 'open', key: K } } }]);
  });

  it('Pay in idle with an open record of the same input resends its key (never a new one)', () => {
    const { state, effects } = step(idle, payEvent({ key: 'fresh', record: openRecord }), cfg);
    expect(state).toMatchObject({ kind: 'sending', attempt: { key: K } });
    expect(find(effects, 'Send')).toMatchObject({ key: K, input });
  });

  it('Pay in idle with an open record of another input is refused, naming the record key', () => {
    const { effects } = step(idle, payEvent({ input: other, key: 'fresh', record: openRecord }), cfg);
    expect(effects).toEqual([{ type: 'Reply', result: { error: { type: 'open', key: K } } }]);
  });

  it('Pay in idle while another tab holds the lock follows it, and sends nothing', () => {
    const { state, effects } = step(idle, payEvent({ leader: false }), cfg);
    // No key heard yet: idle, its pay() waiting with its input for the other tab's word.
    expect(state).toEqual({ kind: 'idle', waiting: input, flags: follower, paused: false });
    expect(types(effects)).toEqual([]);
  });

  it('Pay in settled with the same input answers the outcome without a request', () => {
    expect(step(settled, payEvent({ key: 'fresh' }), cfg).effects).toEqual([{ type: 'Reply', result: { ok: outcome } }]);
  });

  it('Pay in settled with another input asks for reset() first', () => {
    const { effects } = step(settled, payEvent({ input: other, key: 'fresh' }), cfg);
    expect(effects[0]).toMatchObject({ type: 'Reply', result: { error: { type: 'state', state: 'settled' } } });
  });

  it('Pay in unknown with the same input resends the same key with a fresh budget', () => {
    const { state, effects } = step(unknown, payEvent({ key: 'fresh', now: T0 + 99_000 }), cfg);
    expect(state).toMatchObject({ kind: 'sending', attempt: { key: K, sends: 9 }, run: { since: T0 + 99_000, tries: 1 } });
    expect(find(effects, 'Send')).toMatchObject({ key: K });
  });
});

describe('step: answers to chargeCard', () => {
  it('a network error in sending retries after the jittered wait', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: lost, now: T0 + 100, jitter: 0.5 }, cfg);
    expect(state).toMatchObject({ kind: 'retrying', attempt: { key: K }, retryInMs: 200, cause: 'network', paused: false });
    expect(find(effects, 'SetTimer')).toEqual({ type: 'SetTimer', ms: 200 }); // 0.5 × 400
    expect(find(effects, 'Emit')!.event).toMatchObject({ type: 'retry', cause: 'network', waitMs: 200, try: 2 });
  });

  it('RATE_LIMITED with retryAfterMs=1500 waits at least 1500 ms', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: err('RATE_LIMITED', true, 1500), now: T0, jitter: 0.01 }, cfg);
    expect(state.kind).toBe('retrying');
    expect(find(effects, 'SetTimer')!.ms).toBeGreaterThanOrEqual(1500);
  });

  it.each(['SERVICE_UNAVAILABLE', 'REQUEST_TIMEOUT', 'INTERNAL_SERVER_ERROR'])('%s is retried with the same key', (code) => {
    const { state } = step(sending, { type: 'Answered', answer: err(code, true), now: T0, jitter: 0.3 }, cfg);
    expect(state).toMatchObject({ kind: 'retrying', attempt: { key: K }, cause: code, error: { code } });
  });

  it.each(['BAD_USER_INPUT', 'IDEMPOTENCY_KEY_REUSED', 'ORDER_ALREADY_PAID', 'CHECKOUT_SESSION_PAID', 'UNAUTHENTICATED', 'FORBIDDEN'])(
    '%s is rejected: never retried, the record forgotten',
    (code) => {
      const { state, effects } = step(sending, { type: 'Answered', answer: err(code, false), now: T0, jitter: 0.3 }, cfg);
      expect(state).toMatchObject({ kind: 'rejected', attempt: { key: K }, error: { code } });
      expect(types(effects)).toEqual(['Forget', 'Settle', 'Broadcast']);
      expect(find(effects, 'Settle')!.result).toEqual({ error: { type: 'rejected', key: K, error: { code, message: code } } });
    },
  );

  it('SUCCEEDED settles: persisted with expiresAt, waiters resolved', () => {
    const p = payload('SUCCEEDED', { expiresAt: '2026-01-02T00:00:00Z' });
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(p), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'settled', outcome: { status: 'SUCCEEDED', key: K, charge }, attempt: { expiresAt: '2026-01-02T00:00:00Z' } });
    expect(find(effects, 'Persist')!.record).toMatchObject({ status: 'settled', expiresAt: '2026-01-02T00:00:00Z' });
    expect(find(effects, 'Settle')!.result).toMatchObject({ ok: { status: 'SUCCEEDED' } });
  });

  it('FAILED (a decline) is an outcome, not an error', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(payload('FAILED')), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'settled', outcome: { status: 'FAILED', failure: { code: 'card_declined' } } });
    expect(find(effects, 'Settle')!.result).toMatchObject({ ok: { status: 'FAILED' } });
  });

  it('PROCESSING is followed over the stream, never sent again', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(payload('PROCESSING', { retryAfterMs: 800 })), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'following', live: 'sse', liveOpen: false, pollMs: 800 });
    expect(find(effects, 'Subscribe')).toEqual({ type: 'Subscribe', key: K, mode: 'sse' });
    expect(find(effects, 'SetTimer')!.ms).toBe(cfg.liveConnectMs);
    expect(find(effects, 'Send')).toBeUndefined();
  });

  it('PROCESSING with live: poll asks chargeStatus at the server\'s retryAfterMs', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(payload('PROCESSING', { retryAfterMs: 800 })), now: T0, jitter: 0 }, poll);
    expect(state).toMatchObject({ kind: 'following', live: 'poll', retryInMs: 800 });
    expect(types(effects)).toContain('SetTimer');
    expect(find(effects, 'SetTimer')!.ms).toBe(800);
  });

  it('the budget spent without an answer is unknown, resumable', () => {
    const late: ChargerState = { ...sending, run: { since: T0, tries: 3 } };
    const { state, effects } = step(late, { type: 'Answered', answer: lost, now: T0 + 44_900, jitter: 0.9 }, cfg);
    expect(state).toMatchObject({ kind: 'unknown', attempt: { key: K } });
    expect(find(effects, 'Settle')!.result).toEqual({ error: { type: 'unknown', key: K } });
    expect(find(effects, 'Forget')).toBeUndefined();
  });

  it('maxAttempts spent is unknown', () => {
    const { state } = step({ ...sending, run: { since: T0, tries: 8 } }, { type: 'Answered', answer: lost, now: T0, jitter: 0 }, cfg);
    expect(state.kind).toBe('unknown');
  });

  it('a lost answer while offline pauses instead of retrying', () => {
    const { state, effects } = step({ ...sending, flags: { ...flags, offline: true } }, { type: 'Answered', answer: lost, now: T0, jitter: 0.5 }, cfg);
    expect(state).toMatchObject({ kind: 'retrying', paused: true, retryInMs: null, flags: { offline: true } });
    expect(types(effects)).toEqual(['ClearTimer', 'Emit', 'Broadcast']); // no timer: nothing is sent until online
    expect(find(effects, 'Emit')!.event).toMatchObject({ type: 'pause', reason: 'offline' });
  });

  it('an answer arriving in another state is ignored', () => {
    expect(step(settled, { type: 'Answered', answer: lost, now: T0, jitter: 0 }, cfg).effects).toEqual([]);
  });
});

describe('step: retrying, and paused while offline or hidden', () => {
  it('TimerFired in retrying sends the same key again, saying why', () => {
    const { state, effects } = step(retrying, { type: 'TimerFired', now: T0 + 200 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', attempt: { sends: 2 }, run: { since: T0, tries: 2 }, cause: 'network' });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, try: 2 });
    const busy = step({ ...retrying, cause: 'SERVICE_UNAVAILABLE' }, { type: 'TimerFired', now: T0 + 200 }, cfg).state;
    expect(busy).toMatchObject({ kind: 'sending', cause: 'SERVICE_UNAVAILABLE' });
  });

  it.each([
    ['a new attempt', step(idle, payEvent(), cfg).state],
    ['an unknown attempt sent again', step(unknown, payEvent(), cfg).state],
    ['an open record resumed', step(idle, { type: 'Resume', record: openRecord, leader: true, now: T0 }, cfg).state],
  ])('sending %s is no retry: no cause', (_, state) => {
    expect(state.kind).toBe('sending');
    expect(state).not.toHaveProperty('cause');
  });

  it('Offline while retrying pauses and stops the timer', () => {
    const { state, effects } = step(retrying, { type: 'Offline', now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'retrying', paused: true, flags: { offline: true } });
    expect(find(effects, 'Emit')!.event).toEqual({ type: 'pause', key: K, reason: 'offline' });
    expect(types(effects)).toEqual(['ClearTimer', 'Emit', 'Broadcast']);
  });

  it('Online after a pause sends at once with a fresh budget', () => {
    const paused = step(retrying, { type: 'Offline', now: T0 }, cfg).state;
    const { state, effects } = step(paused, { type: 'Online', now: T0 + 60_000 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', attempt: { key: K }, run: { since: T0 + 60_000, tries: 1 }, cause: 'network', paused: false });
    expect(state.flags.offline).toBe(false);
    expect(types(effects).slice(0, 2)).toEqual(['Emit', 'Send']);
  });

  it('Hidden while retrying pauses; Visible sends at once', () => {
    const paused = step(retrying, { type: 'Hidden', now: T0 }, cfg).state;
    expect(paused).toMatchObject({ kind: 'retrying', paused: true, flags: { hidden: true } });
    const { state, effects } = step(paused, { type: 'Visible', now: T0 + 5 }, cfg);
    expect(state.kind).toBe('sending');
    expect(find(effects, 'Send')).toBeDefined();
  });

  it('Visible while still offline stays paused', () => {
    const paused = step({ ...retrying, flags: { ...flags, offline: true, hidden: true } }, { type: 'Hidden', now: T0 }, cfg).state;
    expect(step(paused, { type: 'Visible', now: T0 }, cfg).state).toMatchObject({ kind: 'retrying', paused: true });
  });

  it('Visible in retrying (timers throttled while hidden) sends at once', () => {
    const { state, effects } = step(retrying, { type: 'Visible', now: T0 }, cfg);
    expect(state.kind).toBe('sending');
    expect(types(effects)).toEqual(['ClearTimer', 'Send', 'Broadcast']);
  });

  it('a retry paused offline that went hidden stays paused back online, until it is visible', () => {
    let st = step(retrying, { type: 'Offline', now: T0 }, cfg).state;
    st = step(st, { type: 'Hidden', now: T0 }, cfg).state;
    const online = step(st, { type: 'Online', now: T0 + 5 }, cfg);
    expect(online.state).toMatchObject({ kind: 'retrying', paused: true, flags: { offline: false, hidden: true } });
    expect(online.effects).toEqual([]);
    const visible = step(online.state, { type: 'Visible', now: T0 + 10 }, cfg);
    expect(visible.state).toMatchObject({ kind: 'sending', paused: false, run: { since: T0 + 10, tries: 1 } });
    expect(types(visible.effects)).toEqual(['Emit', 'Send', 'Broadcast']);
  });

  it('Offline while sending only takes note: the request on the wire ends by itself', () => {
    const { state, effects } = step(sending, { type: 'Offline', now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', paused: false, flags: { offline: true } });
    expect(effects).toEqual([]);
  });
});

describe('step: following PROCESSING', () => {
  it('LiveNext PROCESSING opens the stream: recheck timer', () => {
    const { state, effects } = step(processingSse, { type: 'LiveNext', payload: payload('PROCESSING'), now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'following', liveOpen: true });
    expect(effects).toEqual([{ type: 'SetTimer', ms: cfg.liveRecheckMs }]);
  });

  it('LiveNext SUCCEEDED settles and closes the stream', () => {
    const { state, effects } = step(processingSse, { type: 'LiveNext', payload: payload('SUCCEEDED'), now: T0 }, cfg);
    expect(state.kind).toBe('settled');
    expect(types(effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Persist', 'Settle', 'Broadcast']);
  });

  it('LiveFailed falls back to polling at retryAfterMs', () => {
    const { state, effects } = step(processingSse, { type: 'LiveFailed', reason: 'HTTP 502', now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'following', live: 'poll', liveFailed: 'HTTP 502', retryInMs: 800 });
    expect(effects).toEqual([{ type: 'Unsubscribe' }, { type: 'SetTimer', ms: 800 }]);
    const fired = step(state, { type: 'TimerFired', now: T0 + 800 }, cfg);
    expect(fired.effects).toEqual([{ type: 'AskStatus', key: K }]);
  });

  it('a stream that says nothing within liveConnectMs is dropped for polling', () => {
    const { state, effects } = step(processingSse, { type: 'TimerFired', now: T0 + 3000 }, cfg);
    expect(state).toMatchObject({ kind: 'following', live: 'poll', liveFailed: 'no answer in time' });
    expect(effects).toEqual([{ type: 'Unsubscribe' }, { type: 'AskStatus', key: K }]);
  });

  it('polled from the start (a key only asked about) is not a stream that failed: no liveFailed', () => {
    expect(processingPoll).not.toHaveProperty('liveFailed');
    const asked = step(processingPoll, { type: 'StatusAnswered', answer: ok(payload('PROCESSING')), now: T0, jitter: 0 }, cfg).state;
    expect(asked).not.toHaveProperty('liveFailed');
    const adopted = step(idle, { type: 'Resume', record: null, returnKey: K, leader: true, now: T0 }, cfg).state;
    expect(adopted).toMatchObject({ kind: 'following', live: 'poll' });
    expect(adopted).not.toHaveProperty('liveFailed');
  });

  it('StatusAnswered PROCESSING waits the server\'s pace, then slows down', () => {
    const { state, effects } = step(processingPoll, { type: 'StatusAnswered', answer: ok(payload('PROCESSING', { retryAfterMs: 500 })), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'following', checks: 1, pollMs: 500 });
    expect(effects).toEqual([{ type: 'SetTimer', ms: 500 }]);
    expect(pollDelay(500, 10, cfg)).toBe(15_000);
    expect(pollDelay(500, 4, cfg)).toBe(500);
    expect(pollDelay(500, 6, cfg)).toBe(2000);
  });

  it('StatusAnswered FAILED settles', () => {
    const { state } = step(processingPoll, { type: 'StatusAnswered', answer: ok(payload('FAILED')), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'settled', outcome: { status: 'FAILED' } });
  });

  it('StatusAnswered null (the key never reached the server) resends the same key', () => {
    const { state, effects } = step(processingPoll, { type: 'StatusAnswered', answer: ok(null), now: T0, jitter: 0 }, cfg);
    expect(state.kind).toBe('sending');
    expect(find(effects, 'Send')).toMatchObject({ key: K });
  });

  it('StatusAnswered lost keeps polling', () => {
    const { state, effects } = step(processingPoll, { type: 'StatusAnswered', answer: lost, now: T0, jitter: 0 }, cfg);
    expect(state.kind).toBe('following');
    expect(types(effects)).toEqual(['SetTimer']);
  });

  it('past expiresAt without an answer: unknown, never chargeCard', () => {
    const s = { ...processingPoll, attempt: { ...processingPoll.attempt, expiresAt: new Date(T0 - 1).toISOString() } };
    const { state, effects } = step(s, { type: 'TimerFired', now: T0 }, cfg);
    expect(state.kind).toBe('unknown');
    expect(find(effects, 'Send')).toBeUndefined();
  });

  it('Offline while processing pauses; Online asks chargeStatus at once', () => {
    const paused = step(processingSse, { type: 'Offline', now: T0 }, cfg);
    expect(paused.state).toMatchObject({ kind: 'following', paused: true, retryInMs: null });
    expect(types(paused.effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Emit', 'Broadcast']);
    const back = step(paused.state, { type: 'Online', now: T0 + 10 }, cfg);
    expect(back.state).toMatchObject({ kind: 'following', paused: false, live: 'sse', liveOpen: false });
    expect(find(back.effects, 'AskStatus')).toEqual({ type: 'AskStatus', key: K });
    // The pause closed the stream: it is opened again, or the page would say connecting while it polls.
    expect(find(back.effects, 'Subscribe')).toEqual({ type: 'Subscribe', key: K, mode: 'sse' });
  });

  it('Hidden while the stream is open keeps following', () => {
    const s = { ...processingSse, liveOpen: true };
    expect(step(s, { type: 'Hidden', now: T0 }, cfg).state).toMatchObject({ kind: 'following', paused: false, flags: { hidden: true } });
  });
});

describe('step: resume', () => {
  it('an open record is resent with the same key and input', () => {
    const { state, effects } = step(idle, { type: 'Resume', record: openRecord, leader: true, now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', attempt: { key: K, input, sends: 1 } });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, try: 1 });
  });

  it('an open record past its expiresAt is only asked about, never resent', () => {
    const rec = { ...openRecord, expiresAt: new Date(T0 - 1000).toISOString() };
    const { state, effects } = step(idle, { type: 'Resume', record: rec, leader: true, now: T0 }, cfg);
    expect(state.kind).toBe('following');
    expect(find(effects, 'Send')).toBeUndefined();
    expect(find(effects, 'AskStatus')).toEqual({ type: 'AskStatus', key: K });
  });

  it('no record resolves null', () => {
    expect(step(idle, { type: 'Resume', record: null, leader: true, now: T0 }, cfg).effects).toEqual([
      { type: 'Reply', result: { ok: null } },
    ]);
  });

  it('a settled record resolves with its outcome', () => {
    const rec: AttemptRecord = { ...openRecord, status: 'settled', outcome };
    const { state, effects } = step(idle, { type: 'Resume', record: rec, leader: true, now: T0 }, cfg);
    expect(state.kind).toBe('settled');
    expect(effects[0]).toEqual({ type: 'Reply', result: { ok: outcome } });
  });

  it('resume in unknown resends the same key', () => {
    const { effects } = step(unknown, { type: 'Resume', record: null, leader: true, now: T0 }, cfg);
    expect(find(effects, 'Send')).toMatchObject({ key: K });
  });
});

describe('step: reset', () => {
  it.each([
    ['settled', settled],
    ['rejected', rejected],
  ])('Reset in %s goes idle and forgets the record', (_, s) => {
    expect(step(s, { type: 'Reset' }, cfg)).toEqual({ state: idle, effects: [{ type: 'Forget' }] });
  });

  it.each([
    ['unknown', unknown],
    ['sending', sending],
    ['retrying', retrying],
    ['processing', processingPoll],
  ])('Reset in %s is refused: a new key now could charge twice', (_, s) => {
    const { state, effects } = step(s, { type: 'Reset' }, cfg);
    expect(state).toBe(s);
    expect(effects[0]).toMatchObject({ type: 'Reply', result: { error: { type: 'state', state: s.kind } } });
  });
});

describe('step: other tabs', () => {
  it('an idle tab shows another tab\'s attempt', () => {
    const { state } = step(idle, { type: 'RemoteProgress', progress: processingPoll, now: T0 }, cfg);
    expect(state).toEqual({ ...processingPoll, flags: follower });
  });

  it('an idle tab leaves another tab\'s finished attempt alone, so its own next pay() is not refused', () => {
    // As after this tab's reset(), when the word of the attempt it reset arrives late.
    for (const progress of [settled, { ...rejected, error: { code: 'CARD_DECLINED', message: 'declined' } }] as const) {
      const { state, effects } = step(idle, { type: 'RemoteProgress', progress, now: T0 }, cfg);
      expect(state).toEqual(idle);
      expect(effects).toEqual([]);
      const next = step(state, { type: 'Pay', input: other, key: 'fresh', record: null, leader: true, now: T0 }, cfg);
      expect(next.state).toMatchObject({ kind: 'sending', attempt: { key: 'fresh', input: other } });
    }
  });

  it('a follower settles when the sender does', () => {
    const waiting: ChargerState = { kind: 'idle', waiting: input, flags: follower, paused: false };
    const { state, effects } = step(waiting, { type: 'RemoteProgress', progress: settled, now: T0 }, cfg);
    expect(state).toEqual({ ...settled, flags: follower });
    expect(effects).toEqual([{ type: 'Settle', result: { ok: outcome } }]);
  });

  it('a follower of another input is refused with the other tab\'s key', () => {
    const waiting: ChargerState = { kind: 'idle', waiting: other, flags: follower, paused: false };
    const { effects } = step(waiting, { type: 'RemoteProgress', progress: sending, now: T0 }, cfg);
    expect(effects).toEqual([{ type: 'Settle', result: { error: { type: 'open', key: K } } }]);
  });

  it('a follower shows the sender\'s pause, with its own flags; the sender tells of its pause and its end', () => {
    const paused = step(retrying, { type: 'Offline', now: T0 }, cfg);
    expect(find(paused.effects, 'Broadcast')!.progress).toBe(paused.state);
    const shown = step({ ...idle, flags: { ...flags, hidden: true } }, { type: 'RemoteProgress', progress: find(paused.effects, 'Broadcast')!.progress, now: T0 }, cfg);
    expect(shown.state).toEqual({ ...retrying, retryInMs: null, paused: true, flags: { offline: false, hidden: true, follower: true } });
    const back = step(paused.state, { type: 'Online', now: T0 + 5 }, cfg);
    expect(find(back.effects, 'Broadcast')!.progress).toMatchObject({ kind: 'sending', paused: false });
  });

  it('a tab sending its own attempt ignores another\'s word', () => {
    const theirs: ChargerState = { ...settled, attempt: { key: 'x', input, sends: 1 } };
    expect(step(sending, { type: 'RemoteProgress', progress: theirs, now: T0 }, cfg).state).toBe(sending);
  });

  it('a follower that gets the lock asks about the known key first, and never mints', () => {
    const shown: ChargerState = { ...processingSse, liveOpen: true, flags: follower };
    const { state, effects } = step(shown, { type: 'Leader', key: 'fresh', record: null, now: T0 }, cfg);
    expect(state).toEqual({ ...processingPoll, pollMs: cfg.pollMs, flags });
    expect(effects).toEqual([{ type: 'AskStatus', key: K }, { type: 'Broadcast', progress: state }]);
    // the server never saw it: the same key is sent
    const next = step(state, { type: 'StatusAnswered', answer: ok(null), now: T0, jitter: 0 }, cfg);
    expect(find(next.effects, 'Send')).toMatchObject({ key: K });
  });

  it('a follower never sends on a timer or an answer', () => {
    const shown: ChargerState = { ...retrying, flags: follower };
    expect(step(shown, { type: 'TimerFired', now: T0 }, cfg).effects).toEqual([]);
    expect(step({ ...sending, flags: follower }, { type: 'Answered', answer: lost, now: T0, jitter: 0 }, cfg).effects).toEqual([]);
  });
});

describe('step: determinism', () => {
  it('the same state and event give the same result', () => {
    const e: MachineEvent = { type: 'Answered', answer: lost, now: T0 + 5, jitter: 0.42 };
    expect(step(sending, e, cfg)).toEqual(step(sending, e, cfg));
  });
});
