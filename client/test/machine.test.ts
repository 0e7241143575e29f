import { describe, expect, it } from 'vitest';
import { pollDelay } from '../src/following.js';
import { machineDefaults, step } from '../src/machine.js';
import type { Effect, MachineConfig, MachineEvent } from '../src/machine-types.js';
import type { AttemptRecord } from '../src/record.js';
import type { Answer } from '../src/transport.js';
import { chargeOf } from './fakes.js';
import type { ChargePayload, ChargerState } from '../src/types.js';

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

const sending: ChargerState = { kind: 'sending', key: K, input, attempt: 1, since: T0, tries: 1 };
const retrying: ChargerState = { kind: 'retrying', key: K, input, attempt: 1, since: T0, tries: 1, retryInMs: 200 };
const processingPoll: ChargerState = { kind: 'processing', key: K, input, attempt: 1, live: 'poll', pollMs: 800, checks: 0 };
const processingSse: ChargerState = { kind: 'processing', key: K, input, attempt: 1, live: 'sse', liveOpen: false, pollMs: 800, checks: 0 };
const outcome = { status: 'SUCCEEDED' as const, key: K, charge, replayed: false };
const settled: ChargerState = { kind: 'settled', key: K, input, outcome };
const rejected: ChargerState = { kind: 'rejected', key: K, input, error: { code: 'BAD_USER_INPUT', message: 'bad' } };
const unknown: ChargerState = { kind: 'unknown', key: K, input, attempt: 8 };
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
    const { state, effects } = step({ kind: 'idle' }, payEvent(), cfg);
    expect(state).toMatchObject({ kind: 'sending', key: K, input, attempt: 1 });
    expect(types(effects).slice(0, 2)).toEqual(['Persist', 'Send']);
    expect(find(effects, 'Persist')!.record).toMatchObject({ key: K, status: 'open', input });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, attempt: 1 });
    expect(find(effects, 'Broadcast')!.progress).toMatchObject({ kind: 'sending', key: K });
  });

  it.each([
    ['sending', sending],
    ['retrying', retrying],
    ['processing', processingPoll],
    ['paused', { ...retrying, kind: 'paused', pausedBy: 'offline', pausedFrom: 'retrying' } as ChargerState],
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
    const { state, effects } = step({ kind: 'idle' }, payEvent({ key: 'fresh', record: openRecord }), cfg);
    expect(state).toMatchObject({ kind: 'sending', key: K });
    expect(find(effects, 'Send')).toMatchObject({ key: K, input });
  });

  it('Pay in idle with an open record of another input is refused, naming the record key', () => {
    const { effects } = step({ kind: 'idle' }, payEvent({ input: other, key: 'fresh', record: openRecord }), cfg);
    expect(effects).toEqual([{ type: 'Reply', result: { error: { type: 'open', key: K } } }]);
  });

  it('Pay in idle while another tab holds the lock follows it, and sends nothing', () => {
    const { state, effects } = step({ kind: 'idle' }, payEvent({ leader: false }), cfg);
    expect(state).toMatchObject({ kind: 'sending', remote: true, input });
    expect(state.key).toBeUndefined();
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
    expect(state).toMatchObject({ kind: 'sending', key: K, attempt: 9, since: T0 + 99_000, tries: 1 });
    expect(find(effects, 'Send')).toMatchObject({ key: K });
  });
});

describe('step: answers to chargeCard', () => {
  it('a network error in sending retries after the jittered wait', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: lost, now: T0 + 100, jitter: 0.5 }, cfg);
    expect(state).toMatchObject({ kind: 'retrying', key: K, retryInMs: 200 });
    expect(find(effects, 'SetTimer')).toEqual({ type: 'SetTimer', ms: 200 }); // 0.5 × 400
    expect(find(effects, 'Emit')!.event).toMatchObject({ type: 'retry', cause: 'network', waitMs: 200, attempt: 2 });
  });

  it('RATE_LIMITED with retryAfterMs=1500 waits at least 1500 ms', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: err('RATE_LIMITED', true, 1500), now: T0, jitter: 0.01 }, cfg);
    expect(state.kind).toBe('retrying');
    expect(find(effects, 'SetTimer')!.ms).toBeGreaterThanOrEqual(1500);
  });

  it.each(['SERVICE_UNAVAILABLE', 'REQUEST_TIMEOUT', 'INTERNAL_SERVER_ERROR'])('%s is retried with the same key', (code) => {
    const { state } = step(sending, { type: 'Answered', answer: err(code, true), now: T0, jitter: 0.3 }, cfg);
    expect(state).toMatchObject({ kind: 'retrying', key: K, error: { code } });
  });

  it.each(['BAD_USER_INPUT', 'IDEMPOTENCY_KEY_REUSED', 'ORDER_ALREADY_PAID', 'CHECKOUT_SESSION_PAID', 'UNAUTHENTICATED', 'FORBIDDEN'])(
    '%s is rejected: never retried, the record forgotten',
    (code) => {
      const { state, effects } = step(sending, { type: 'Answered', answer: err(code, false), now: T0, jitter: 0.3 }, cfg);
      expect(state).toMatchObject({ kind: 'rejected', key: K, error: { code } });
      expect(types(effects)).toEqual(['Forget', 'Settle', 'Broadcast']);
      expect(find(effects, 'Settle')!.result).toEqual({ error: { type: 'rejected', key: K, error: { code, message: code } } });
    },
  );

  it('SUCCEEDED settles: persisted with expiresAt, waiters resolved', () => {
    const p = payload('SUCCEEDED', { expiresAt: '2026-01-02T00:00:00Z' });
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(p), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'settled', outcome: { status: 'SUCCEEDED', key: K, charge }, expiresAt: '2026-01-02T00:00:00Z' });
    expect(find(effects, 'Persist')!.record).toMatchObject({ status: 'settled', expiresAt: '2026-01-02T00:00:00Z' });
    expect(find(effects, 'Settle')!.result).toMatchObject({ ok: { status: 'SUCCEEDED' } });
  });

  it('FAILED (a decline) is an outcome, not an error', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(payload('FAILED')), now: T0, jitter: 0 }, cfg);
    expect(state.outcome).toMatchObject({ status: 'FAILED', failure: { code: 'card_declined' } });
    expect(find(effects, 'Settle')!.result).toMatchObject({ ok: { status: 'FAILED' } });
  });

  it('PROCESSING is followed over the stream, never sent again', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(payload('PROCESSING', { retryAfterMs: 800 })), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'processing', live: 'sse', liveOpen: false, pollMs: 800 });
    expect(find(effects, 'Subscribe')).toEqual({ type: 'Subscribe', key: K, mode: 'sse' });
    expect(find(effects, 'SetTimer')!.ms).toBe(cfg.liveConnectMs);
    expect(find(effects, 'Send')).toBeUndefined();
  });

  it('PROCESSING with live: poll asks chargeStatus at the server\'s retryAfterMs', () => {
    const { state, effects } = step(sending, { type: 'Answered', answer: ok(payload('PROCESSING', { retryAfterMs: 800 })), now: T0, jitter: 0 }, poll);
    expect(state).toMatchObject({ kind: 'processing', live: 'poll', retryInMs: 800 });
    expect(types(effects)).toContain('SetTimer');
    expect(find(effects, 'SetTimer')!.ms).toBe(800);
  });

  it('the budget spent without an answer is unknown, resumable', () => {
    const late: ChargerState = { ...sending, since: T0, tries: 3 };
    const { state, effects } = step(late, { type: 'Answered', answer: lost, now: T0 + 44_900, jitter: 0.9 }, cfg);
    expect(state).toMatchObject({ kind: 'unknown', key: K });
    expect(find(effects, 'Settle')!.result).toEqual({ error: { type: 'unknown', key: K } });
    expect(find(effects, 'Forget')).toBeUndefined();
  });

  it('maxAttempts spent is unknown', () => {
    const { state } = step({ ...sending, tries: 8 }, { type: 'Answered', answer: lost, now: T0, jitter: 0 }, cfg);
    expect(state.kind).toBe('unknown');
  });

  it('a lost answer while offline pauses instead of retrying', () => {
    const { state, effects } = step({ ...sending, offline: true }, { type: 'Answered', answer: lost, now: T0, jitter: 0.5 }, cfg);
    expect(state).toMatchObject({ kind: 'paused', pausedBy: 'offline', pausedFrom: 'retrying' });
    expect(find(effects, 'Emit')!.event).toMatchObject({ type: 'pause', reason: 'offline' });
  });

  it('an answer arriving in another state is ignored', () => {
    expect(step(settled, { type: 'Answered', answer: lost, now: T0, jitter: 0 }, cfg).effects).toEqual([]);
  });
});

describe('step: retrying, paused', () => {
  it('TimerFired in retrying sends the same key again', () => {
    const { state, effects } = step(retrying, { type: 'TimerFired', now: T0 + 200 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', attempt: 2, tries: 2 });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, attempt: 2 });
  });

  it('Offline while retrying pauses and stops the timer', () => {
    const { state, effects } = step(retrying, { type: 'Offline', now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'paused', pausedBy: 'offline', offline: true });
    expect(types(effects)).toEqual(['ClearTimer', 'Emit', 'Broadcast']);
  });

  it('Online after a pause sends at once with a fresh budget', () => {
    const paused = step(retrying, { type: 'Offline', now: T0 }, cfg).state;
    const { state, effects } = step(paused, { type: 'Online', now: T0 + 60_000 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', key: K, since: T0 + 60_000, tries: 1 });
    expect(state.offline).toBeFalsy();
    expect(types(effects).slice(0, 2)).toEqual(['Emit', 'Send']);
  });

  it('Hidden while retrying pauses; Visible sends at once', () => {
    const paused = step(retrying, { type: 'Hidden', now: T0 }, cfg).state;
    expect(paused).toMatchObject({ kind: 'paused', pausedBy: 'hidden' });
    const { state, effects } = step(paused, { type: 'Visible', now: T0 + 5 }, cfg);
    expect(state.kind).toBe('sending');
    expect(find(effects, 'Send')).toBeDefined();
  });

  it('Visible while still offline stays paused', () => {
    const paused = step({ ...retrying, offline: true, hidden: true }, { type: 'Hidden', now: T0 }, cfg).state;
    expect(step(paused, { type: 'Visible', now: T0 }, cfg).state.kind).toBe('paused');
  });

  it('Visible in retrying (timers throttled while hidden) sends at once', () => {
    const { state, effects } = step(retrying, { type: 'Visible', now: T0 }, cfg);
    expect(state.kind).toBe('sending');
    expect(types(effects)).toEqual(['ClearTimer', 'Send', 'Broadcast']);
  });

  it('Offline while sending only takes note: the request on the wire ends by itself', () => {
    const { state, effects } = step(sending, { type: 'Offline', now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', offline: true });
    expect(effects).toEqual([]);
  });
});

describe('step: processing', () => {
  it('LiveNext PROCESSING opens the stream: recheck timer', () => {
    const { state, effects } = step(processingSse, { type: 'LiveNext', payload: payload('PROCESSING'), now: T0 }, cfg);
    expect(state.liveOpen).toBe(true);
    expect(effects).toEqual([{ type: 'SetTimer', ms: cfg.liveRecheckMs }]);
  });

  it('LiveNext SUCCEEDED settles and closes the stream', () => {
    const { state, effects } = step(processingSse, { type: 'LiveNext', payload: payload('SUCCEEDED'), now: T0 }, cfg);
    expect(state.kind).toBe('settled');
    expect(types(effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Persist', 'Settle', 'Broadcast']);
  });

  it('LiveFailed falls back to polling at retryAfterMs', () => {
    const { state, effects } = step(processingSse, { type: 'LiveFailed', reason: 'HTTP 502', now: T0 }, cfg);
    expect(state).toMatchObject({ live: 'poll', retryInMs: 800 });
    expect(effects).toEqual([{ type: 'Unsubscribe' }, { type: 'SetTimer', ms: 800 }]);
    const fired = step(state, { type: 'TimerFired', now: T0 + 800 }, cfg);
    expect(fired.effects).toEqual([{ type: 'AskStatus', key: K }]);
  });

  it('a stream that says nothing within liveConnectMs is dropped for polling', () => {
    const { state, effects } = step(processingSse, { type: 'TimerFired', now: T0 + 3000 }, cfg);
    expect(state.live).toBe('poll');
    expect(effects).toEqual([{ type: 'Unsubscribe' }, { type: 'AskStatus', key: K }]);
  });

  it('StatusAnswered PROCESSING waits the server\'s pace, then slows down', () => {
    const { state, effects } = step(processingPoll, { type: 'StatusAnswered', answer: ok(payload('PROCESSING', { retryAfterMs: 500 })), now: T0, jitter: 0 }, cfg);
    expect(state).toMatchObject({ kind: 'processing', checks: 1, pollMs: 500 });
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
    expect(state.kind).toBe('processing');
    expect(types(effects)).toEqual(['SetTimer']);
  });

  it('past expiresAt without an answer: unknown, never chargeCard', () => {
    const s = { ...processingPoll, expiresAt: new Date(T0 - 1).toISOString() };
    const { state, effects } = step(s, { type: 'TimerFired', now: T0 }, cfg);
    expect(state.kind).toBe('unknown');
    expect(find(effects, 'Send')).toBeUndefined();
  });

  it('Offline while processing pauses; Online asks chargeStatus at once', () => {
    const paused = step(processingSse, { type: 'Offline', now: T0 }, cfg);
    expect(paused.state).toMatchObject({ kind: 'paused', pausedFrom: 'processing' });
    expect(types(paused.effects)).toEqual(['ClearTimer', 'Unsubscribe', 'Emit', 'Broadcast']);
    const back = step(paused.state, { type: 'Online', now: T0 + 10 }, cfg);
    expect(back.state.kind).toBe('processing');
    expect(find(back.effects, 'AskStatus')).toEqual({ type: 'AskStatus', key: K });
  });

  it('Hidden while the stream is open keeps following', () => {
    const s = { ...processingSse, liveOpen: true };
    expect(step(s, { type: 'Hidden', now: T0 }, cfg).state.kind).toBe('processing');
  });
});

describe('step: resume', () => {
  it('an open record is resent with the same key and input', () => {
    const { state, effects } = step({ kind: 'idle' }, { type: 'Resume', record: openRecord, leader: true, now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'sending', key: K, input, attempt: 1 });
    expect(find(effects, 'Send')).toEqual({ type: 'Send', key: K, input, attempt: 1 });
  });

  it('an open record past its expiresAt is only asked about, never resent', () => {
    const rec = { ...openRecord, expiresAt: new Date(T0 - 1000).toISOString() };
    const { state, effects } = step({ kind: 'idle' }, { type: 'Resume', record: rec, leader: true, now: T0 }, cfg);
    expect(state.kind).toBe('processing');
    expect(find(effects, 'Send')).toBeUndefined();
    expect(find(effects, 'AskStatus')).toEqual({ type: 'AskStatus', key: K });
  });

  it('no record resolves null', () => {
    expect(step({ kind: 'idle' }, { type: 'Resume', record: null, leader: true, now: T0 }, cfg).effects).toEqual([
      { type: 'Reply', result: { ok: null } },
    ]);
  });

  it('a settled record resolves with its outcome', () => {
    const rec: AttemptRecord = { ...openRecord, status: 'settled', outcome };
    const { state, effects } = step({ kind: 'idle' }, { type: 'Resume', record: rec, leader: true, now: T0 }, cfg);
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
    expect(step(s, { type: 'Reset' }, cfg)).toEqual({ state: { kind: 'idle' }, effects: [{ type: 'Forget' }] });
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
    const { state } = step({ kind: 'idle' }, { type: 'RemoteProgress', progress: { kind: 'processing', key: K, input }, now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'processing', key: K, remote: true });
  });

  it('an idle tab leaves another tab\'s finished attempt alone, so its own next pay() is not refused', () => {
    // As after this tab's reset(), when the word of the attempt it reset arrives late.
    for (const progress of [
      { kind: 'settled' as const, key: K, input, outcome },
      { kind: 'rejected' as const, key: K, input, error: { code: 'CARD_DECLINED', message: 'declined' } },
    ]) {
      const { state, effects } = step({ kind: 'idle' }, { type: 'RemoteProgress', progress, now: T0 }, cfg);
      expect(state).toEqual({ kind: 'idle' });
      expect(effects).toEqual([]);
      const next = step(state, { type: 'Pay', input: other, key: 'fresh', record: null, leader: true, now: T0 }, cfg);
      expect(next.state).toMatchObject({ kind: 'sending', key: 'fresh', input: other });
    }
  });

  it('a follower settles when the sender does', () => {
    const follower: ChargerState = { kind: 'sending', input, remote: true };
    const { state, effects } = step(follower, { type: 'RemoteProgress', progress: { kind: 'settled', key: K, input, outcome }, now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'settled', remote: true, outcome });
    expect(effects).toEqual([{ type: 'Settle', result: { ok: outcome } }]);
  });

  it('a follower of another input is refused with the other tab\'s key', () => {
    const follower: ChargerState = { kind: 'sending', input: other, remote: true };
    const { effects } = step(follower, { type: 'RemoteProgress', progress: { kind: 'sending', key: K, input }, now: T0 }, cfg);
    expect(effects).toEqual([{ type: 'Settle', result: { error: { type: 'open', key: K } } }]);
  });

  it('a tab sending its own attempt ignores another\'s word', () => {
    expect(step(sending, { type: 'RemoteProgress', progress: { kind: 'settled', key: 'x', input, outcome }, now: T0 }, cfg).state).toBe(sending);
  });

  it('a follower that gets the lock asks about the known key first, and never mints', () => {
    const follower: ChargerState = { kind: 'processing', key: K, input, remote: true };
    const { state, effects } = step(follower, { type: 'Leader', key: 'fresh', record: null, now: T0 }, cfg);
    expect(state).toMatchObject({ kind: 'processing', key: K, live: 'poll' });
    expect(state.remote).toBeFalsy();
    expect(effects).toEqual([{ type: 'AskStatus', key: K }, { type: 'Broadcast', progress: { kind: 'processing', key: K, input } }]);
    // the server never saw it: the same key is sent
    const next = step(state, { type: 'StatusAnswered', answer: ok(null), now: T0, jitter: 0 }, cfg);
    expect(find(next.effects, 'Send')).toMatchObject({ key: K });
  });

  it('a follower never sends on a timer or an answer', () => {
    const follower: ChargerState = { kind: 'retrying', key: K, input, remote: true };
    expect(step(follower, { type: 'TimerFired', now: T0 }, cfg).effects).toEqual([]);
  });
});

describe('step: determinism', () => {
  it('the same state and event give the same result', () => {
    const e: MachineEvent = { type: 'Answered', answer: lost, now: T0 + 5, jitter: 0.42 };
    expect(step(sending, e, cfg)).toEqual(step(sending, e, cfg));
  });
});
