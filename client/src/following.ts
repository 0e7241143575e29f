// The transitions of an attempt on its way: chargeCard's and
// chargeStatus's answers, following PROCESSING (and the same attempt
// waiting for the shopper to authenticate, with its nextAction) live or by
// polling, timers, taking the shopper to the bank, and pausing while
// offline or hidden.
import { retryWaitMs } from './backoff.js';
import { expired, type AttemptRecord } from './record.js';
import type { Effect, MachineConfig, Step } from './machine-types.js';
import {
  expiring,
  freshRun,
  idle,
  nextTry,
  persist,
  rejectedResult,
  reply,
  resend,
  same,
  sendable,
  streaming,
  unknown,
  withAction,
  withFlags,
} from './steps.js';
import type { Answer } from './transport.js';
import type {
  ChargePayload,
  ChargerState,
  FollowingState,
  NextAction,
  Outcome,
  RejectedState,
  RetryingState,
  SendingState,
  SettledState,
} from './types.js';

export function answered(s: SendingState, a: Answer, now: number, jitter: number, c: MachineConfig): Step {
  if (a.kind === 'payload' && a.payload) return payload(s, a.payload, c);
  if (a.kind === 'error' && !a.retryable) {
    const st: RejectedState = { kind: 'rejected', attempt: withAction(s.attempt, undefined), error: a.error, flags: s.flags, paused: false };
    return { state: st, effects: [{ type: 'Forget' }, { type: 'Settle', result: rejectedResult(s.attempt.key, a.error) }] };
  }
  const cause = a.kind === 'error' ? a.error.code : 'network';
  const hint = a.kind === 'payload' ? undefined : a.hintMs;
  const error = a.kind === 'error' ? a.error : s.error;
  const wait = retryWaitMs(s.run.tries - 1, jitter, hint, c.retry);
  const st: RetryingState = { kind: 'retrying', attempt: s.attempt, run: s.run, retryInMs: wait, cause, ...(error && { error }), flags: s.flags, paused: false };
  if (s.flags.offline) return pause(st, 'offline');
  if (s.flags.hidden) return pause(st, 'hidden');
  if (s.run.tries >= c.retry.maxAttempts || now + wait - s.run.since > c.retry.budgetMs) return unknown(s, error);
  return {
    state: st,
    effects: [
      { type: 'SetTimer', ms: wait },
      { type: 'Emit', event: { type: 'retry', key: s.attempt.key, try: s.attempt.sends + 1, waitMs: wait, cause } },
    ],
  };
}

/**
 * next, following a PROCESSING attempt, with the nextAction p says: set
 * while the shopper must authenticate, else none. A change of nextAction
 * or expiresAt is persisted (a reload, or the return from the bank, finds
 * it with the key), and a new request to authenticate is announced.
 */
function authenticate(s: SendingState | FollowingState, next: FollowingState, p: ChargePayload, effects: Effect[]): FollowingState {
  const a = p.nextAction ?? undefined;
  const was = s.attempt.nextAction;
  const unchanged = sameAction(was, a);
  // The same object when unchanged: no change for the tabs to hear of.
  const st: FollowingState = { ...next, attempt: withAction(next.attempt, unchanged ? was : a) };
  if (!unchanged || (p.expiresAt && p.expiresAt !== s.attempt.expiresAt)) effects.push(...persist(st.attempt, { status: 'open' }));
  const asking = s.kind === 'following' && was !== undefined;
  if (a && (!asking || !unchanged)) effects.push({ type: 'Emit', event: { type: 'action', key: s.attempt.key, url: a.url } });
  return st;
}

function sameAction(a: NextAction | undefined, b: NextAction | undefined): boolean {
  return a === b || (!!a && !!b && a.type === b.type && a.url === b.url && a.expiresAt === b.expiresAt);
}

/** A status from chargeCard, chargeStatus or the stream. */
function payload(s: SendingState | FollowingState, p: ChargePayload, c: MachineConfig): Step {
  const attempt = expiring(s.attempt, p.expiresAt);
  const key = attempt.key;
  if (p.status === 'SUCCEEDED' || p.status === 'FAILED') {
    const outcome: Outcome =
      p.status === 'SUCCEEDED'
        ? { status: 'SUCCEEDED', key, charge: p.charge!, replayed: p.replayed }
        : { status: 'FAILED', key, failure: p.failure ?? { code: 'unknown', message: 'failed' }, replayed: p.replayed };
    const st: SettledState = { kind: 'settled', attempt: withAction(attempt, undefined), outcome, flags: s.flags, paused: false };
    const effects: Effect[] = [...persist(st.attempt, { status: 'settled', outcome }), { type: 'Settle', result: { ok: outcome } }];
    if (s.kind === 'following') effects.unshift({ type: 'ClearTimer' }, { type: 'Unsubscribe' });
    return { state: st, effects };
  }
  // PROCESSING: follow it, never send it again.
  const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : c.pollMs;
  const effects: Effect[] = [];
  const next: FollowingState = {
    kind: 'following',
    attempt,
    live: c.live,
    liveOpen: false,
    checks: 0,
    pollMs,
    retryInMs: c.live === 'poll' ? pollMs : null,
    flags: s.flags,
    paused: false,
  };
  const st = authenticate(s, next, p, effects);
  if (c.live === 'poll') effects.push({ type: 'SetTimer', ms: pollMs });
  else effects.push({ type: 'Subscribe', key, mode: c.live }, { type: 'SetTimer', ms: c.liveConnectMs });
  return { state: st, effects };
}

export function statusAnswered(s: FollowingState, a: Answer, now: number, c: MachineConfig): Step {
  const checks = s.checks + 1;
  if (a.kind === 'payload') {
    const p = a.payload;
    if (p && p.status !== 'PROCESSING') return payload(s, p, c);
    if (!p) {
      // A key adopted from the return address that this session does not know: nothing to follow.
      if (!sendable(s.attempt)) return { state: idle(s), effects: [{ type: 'ClearTimer' }, { type: 'Unsubscribe' }, { type: 'Settle', result: { ok: null } }] };
      // The server knows no such key: the attempt never reached it, or its stored result is gone.
      // One that asked for authentication did reach it: never sent again from here.
      if (s.attempt.nextAction || expired(s.attempt, now)) return unknown(s);
      return resend(s, s.attempt, freshRun(now), { type: 'Unsubscribe' });
    }
    if (s.paused) return same({ ...s, pollMs: p.retryAfterMs || s.pollMs || c.pollMs, checks });
    const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : s.pollMs;
    const effects: Effect[] = [];
    return nextCheck(authenticate(s, { ...s, pollMs, checks, attempt: expiring(s.attempt, p.expiresAt) }, p, effects), c, effects);
  }
  if (a.kind === 'error' && !a.retryable) return unknown(s, a.error);
  if (s.paused) return same({ ...s, checks });
  // No answer, or a busy server: keep asking at the slower pace.
  return nextCheck({ ...s, checks, ...(a.kind === 'error' && { error: a.error }) }, c);
}

/** Waits for the next chargeStatus: the stream's recheck while it is open, else the poll pace, slowing down. */
function nextCheck(s: FollowingState, c: MachineConfig, before: Effect[] = []): Step {
  const ms = s.live !== 'poll' && s.liveOpen ? c.liveRecheckMs : pollDelay(s.pollMs, s.checks, c);
  return { state: { ...s, retryInMs: ms }, effects: [...before, { type: 'SetTimer', ms }] };
}

/** At the server's pace for five polls, then twice as long each time, up to maxPollMs (never sooner than asked). */
export function pollDelay(baseMs: number, checks: number, c: MachineConfig): number {
  const extra = Math.max(0, checks - 4);
  return Math.max(baseMs, Math.min(baseMs * 2 ** extra, c.maxPollMs));
}

export function liveNext(s: ChargerState, p: ChargePayload, c: MachineConfig): Step {
  if (s.kind !== 'following') return same(s);
  if (p.status !== 'PROCESSING') return payload(s, p, c);
  if (s.paused) return same(s);
  const effects: Effect[] = [];
  const st = authenticate(s, { ...s, attempt: expiring(s.attempt, p.expiresAt) }, p, effects);
  if (s.liveOpen) {
    const changed = st.attempt.nextAction !== s.attempt.nextAction || st.attempt.expiresAt !== s.attempt.expiresAt;
    return changed ? { state: st, effects } : same(s);
  }
  effects.push({ type: 'SetTimer', ms: c.liveRecheckMs });
  return { state: { ...st, liveOpen: true, retryInMs: c.liveRecheckMs }, effects };
}

export function liveFailed(s: ChargerState, reason: string): Step {
  if (s.kind !== 'following' || s.paused || s.live === 'poll') return same(s);
  return {
    state: { ...s, live: 'poll', liveOpen: false, liveFailed: reason, retryInMs: s.pollMs },
    effects: [{ type: 'Unsubscribe' }, { type: 'SetTimer', ms: s.pollMs }],
  };
}

export function timerFired(s: ChargerState, now: number): Step {
  if (s.paused) return same(s); // its timer was cleared when it paused
  if (s.kind === 'retrying') return resend(s, s.attempt, nextTry(s.run));
  if (s.kind !== 'following') return same(s);
  if (expired(s.attempt, now)) return unknown(s);
  if (s.live !== 'poll' && !s.liveOpen) {
    // The stream said nothing in time: poll for the rest of the attempt.
    return {
      state: { ...s, live: 'poll', liveOpen: false, liveFailed: 'no answer in time', retryInMs: 0 },
      effects: [{ type: 'Unsubscribe' }, { type: 'AskStatus', key: s.attempt.key }],
    };
  }
  return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'AskStatus', key: s.attempt.key }] };
}

export function offline(s: ChargerState): Step {
  const st = withFlags(s, { offline: true });
  if (st.flags.follower || st.paused) return same(st);
  if (st.kind === 'retrying' || st.kind === 'following') return pause(st, 'offline');
  return same(st); // sending: the request on the wire ends by itself; its failure then pauses
}

export function hidden(s: ChargerState): Step {
  const st = withFlags(s, { hidden: true });
  if (st.flags.follower || st.paused) return same(st);
  // A stream keeps working in a hidden tab; only retrying and polling wait for the shopper.
  if (st.kind === 'retrying' || (st.kind === 'following' && st.live === 'poll')) return pause(st, 'hidden');
  return same(st);
}

/** What a hidden tab pauses: a retry, and polling (a stream keeps working). */
function pausesHidden(s: RetryingState | FollowingState): boolean {
  return s.kind === 'retrying' || s.live === 'poll';
}

function pause(s: RetryingState | FollowingState, by: 'offline' | 'hidden'): Step {
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (streaming(s)) effects.push({ type: 'Unsubscribe' });
  effects.push({ type: 'Emit', event: { type: 'pause', key: s.attempt.key, reason: by } });
  return { state: { ...s, paused: true, retryInMs: null }, effects };
}

/**
 * Online or visible again (s has the new flags): whatever waited runs at
 * once (timers in hidden tabs are throttled). A paused attempt stays
 * paused while the page is still offline, or still hidden and it retries
 * or polls.
 */
export function wake(s: ChargerState, now: number, c: MachineConfig): Step {
  if (s.flags.follower) return same(s);
  if (s.paused) {
    if (s.flags.offline || (s.flags.hidden && pausesHidden(s))) return same(s);
    const emit: Effect = { type: 'Emit', event: { type: 'unpause', key: s.attempt.key } };
    if (s.kind === 'following') {
      if (expired(s.attempt, now)) return unknown(s);
      // Ask at once, and open the stream again (the pause closed it): until it answers, the
      // attempt is polled, and a stream that says nothing by the next check is given up.
      const live = c.live === 'poll' ? 'poll' : s.live;
      const effects: Effect[] = [emit, { type: 'AskStatus', key: s.attempt.key }];
      if (live !== 'poll') effects.push({ type: 'Subscribe', key: s.attempt.key, mode: live });
      return { state: { ...s, paused: false, live, liveOpen: false, retryInMs: 0 }, effects };
    }
    // A fresh budget: time offline or hidden was not spent waiting for the server.
    return resend(s, s.attempt, freshRun(now), emit);
  }
  if (s.flags.offline || s.flags.hidden) return same(s);
  if (s.kind === 'retrying') return resend(s, s.attempt, nextTry(s.run), { type: 'ClearTimer' });
  if (s.kind === 'following' && (s.live === 'poll' || s.liveOpen)) {
    return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'ClearTimer' }, { type: 'AskStatus', key: s.attempt.key }] };
  }
  return same(s);
}

/**
 * handleNextAction(): to the bank's challenge page. The attempt is in this
 * tab's storage first (it is already, unless another tab sends it), so
 * that the return to the returnUrl finds its key and input.
 */
export function toNextAction(s: ChargerState, record: AttemptRecord | null): Step {
  if (s.kind !== 'following' || s.paused || !s.attempt.nextAction) {
    const where = s.kind !== 'following' ? s.kind : s.paused ? 'following, paused' : 'following without a nextAction';
    return reply(s, { error: { type: 'state', state: s.kind, message: `handleNextAction() needs a nextAction to follow (the shopper must authenticate); the charger is ${where}` } });
  }
  const effects = record?.key === s.attempt.key ? [] : persist(s.attempt, { status: 'open' });
  return { state: s, effects: [...effects, { type: 'Navigate', url: s.attempt.nextAction.url }, { type: 'Reply', result: { ok: null } }] };
}
