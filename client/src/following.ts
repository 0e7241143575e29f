// The transitions of an attempt on its way: chargeCard's and
// chargeStatus's answers, following PROCESSING (and action, the same
// attempt waiting for the shopper to authenticate) live or by polling,
// timers, taking the shopper to the bank, and pausing while offline or
// hidden.
import { retryWaitMs } from './backoff.js';
import { expired, type AttemptRecord } from './record.js';
import type { Effect, MachineConfig, Step } from './machine-types.js';
import { flags, followed, following, persist, rejectedResult, reply, resend, same, strip, unknown } from './steps.js';
import type { Answer } from './transport.js';
import type { ChargePayload, ChargerState, NextAction, Outcome } from './types.js';

export function answered(s: ChargerState, a: Answer, now: number, jitter: number, c: MachineConfig): Step {
  if (a.kind === 'payload' && a.payload) return payload(s, a.payload, c);
  if (a.kind === 'error' && !a.retryable) {
    const st: ChargerState = { ...strip(s), kind: 'rejected', error: a.error };
    delete st.nextAction;
    return { state: st, effects: [{ type: 'Forget' }, { type: 'Settle', result: rejectedResult(st) }] };
  }
  const cause = a.kind === 'error' ? a.error.code : 'network';
  const hint = a.kind === 'payload' ? undefined : a.hintMs;
  const error = a.kind === 'error' ? { error: a.error } : {};
  const tries = s.tries ?? 1;
  const wait = retryWaitMs(tries - 1, jitter, hint, c.retry);
  if (s.offline) return pause({ ...s, ...error }, 'offline', 'retrying');
  if (s.hidden) return pause({ ...s, ...error }, 'hidden', 'retrying');
  if (tries >= c.retry.maxAttempts || now + wait - (s.since ?? now) > c.retry.budgetMs) return unknown({ ...s, ...error });
  return {
    state: { ...strip(s), ...error, kind: 'retrying', retryInMs: wait },
    effects: [
      { type: 'SetTimer', ms: wait },
      { type: 'Emit', event: { type: 'retry', key: s.key!, attempt: (s.attempt ?? 1) + 1, waitMs: wait, cause } },
    ],
  };
}

/**
 * next, following a PROCESSING attempt, as p says: action while the
 * shopper must authenticate, else processing. A change of nextAction or
 * expiresAt is persisted (a reload, or the return from the bank, finds it
 * with the key), and entering action is announced.
 */
function waiting(s: ChargerState, next: ChargerState, p: ChargePayload, effects: Effect[]): ChargerState {
  const a = p.nextAction ?? undefined;
  const unchanged = sameAction(s.nextAction, a);
  const st: ChargerState = { ...next, kind: a ? 'action' : 'processing' };
  if (a) st.nextAction = unchanged ? s.nextAction! : a; // the same object: no change for the tabs to hear of
  else delete st.nextAction;
  if (!unchanged || (p.expiresAt && p.expiresAt !== s.expiresAt)) effects.push(...persist(st, { status: 'open' }));
  if (a && (s.kind !== 'action' || !unchanged)) effects.push({ type: 'Emit', event: { type: 'action', key: s.key!, url: a.url } });
  return st;
}

function sameAction(a: NextAction | undefined, b: NextAction | undefined): boolean {
  return a === b || (!!a && !!b && a.type === b.type && a.url === b.url && a.expiresAt === b.expiresAt);
}

/** A status from chargeCard, chargeStatus or the stream. */
function payload(s: ChargerState, p: ChargePayload, c: MachineConfig): Step {
  const expiresAt = p.expiresAt ?? s.expiresAt;
  const known = { expiresAt };
  if (p.status === 'SUCCEEDED' || p.status === 'FAILED') {
    const outcome: Outcome =
      p.status === 'SUCCEEDED'
        ? { status: 'SUCCEEDED', key: s.key!, charge: p.charge!, replayed: p.replayed }
        : { status: 'FAILED', key: s.key!, failure: p.failure ?? { code: 'unknown', message: 'failed' }, replayed: p.replayed };
    const st: ChargerState = { ...strip(s), ...known, kind: 'settled', outcome };
    delete st.nextAction;
    const effects: Effect[] = [...persist(st, { status: 'settled', outcome }), { type: 'Settle', result: { ok: outcome } }];
    if (followed(s)) effects.unshift({ type: 'ClearTimer' }, { type: 'Unsubscribe' });
    return { state: st, effects };
  }
  // PROCESSING: follow it, never send it again.
  const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : c.pollMs;
  const effects: Effect[] = [];
  const base = waiting(s, { ...strip(s), ...known, pollMs, checks: 0 }, p, effects);
  if (c.live === 'poll') {
    effects.push({ type: 'SetTimer', ms: pollMs });
    return { state: { ...base, live: 'poll', retryInMs: pollMs }, effects };
  }
  effects.push({ type: 'Subscribe', key: s.key!, mode: c.live }, { type: 'SetTimer', ms: c.liveConnectMs });
  return { state: { ...base, live: c.live, liveOpen: false }, effects };
}

export function statusAnswered(s: ChargerState, a: Answer, now: number, c: MachineConfig): Step {
  const checks = (s.checks ?? 0) + 1;
  if (a.kind === 'payload') {
    const p = a.payload;
    if (p && p.status !== 'PROCESSING') return payload(s, p, c);
    if (!p) {
      // A key adopted from the return address that this session does not know: nothing to follow.
      if (!s.input) return { state: flags(s, { kind: 'idle' }), effects: [{ type: 'ClearTimer' }, { type: 'Unsubscribe' }, { type: 'Settle', result: { ok: null } }] };
      // The server knows no such key: the attempt never reached it, or its stored result is gone.
      // One that asked for authentication did reach it: never sent again from here.
      if (s.nextAction || expired(s, now)) return unknown(s);
      return resend(s, now, { type: 'Unsubscribe' });
    }
    if (s.kind === 'paused') return same({ ...s, pollMs: p.retryAfterMs || s.pollMs || c.pollMs, checks });
    const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : (s.pollMs ?? c.pollMs);
    const expiresAt = p.expiresAt ?? s.expiresAt;
    const effects: Effect[] = [];
    return nextCheck(waiting(s, { ...s, pollMs, checks, expiresAt }, p, effects), c, effects);
  }
  if (a.kind === 'error' && !a.retryable) return unknown({ ...s, error: a.error });
  if (s.kind === 'paused') return same({ ...s, checks });
  // No answer, or a busy server: keep asking at the slower pace.
  return nextCheck({ ...s, checks, ...(a.kind === 'error' ? { error: a.error } : {}) }, c);
}

/** Waits for the next chargeStatus: the stream's recheck while it is open, else the poll pace, slowing down. */
function nextCheck(s: ChargerState, c: MachineConfig, before: Effect[] = []): Step {
  const ms = s.live !== 'poll' && s.liveOpen ? c.liveRecheckMs : pollDelay(s.pollMs ?? c.pollMs, s.checks ?? 0, c);
  return { state: { ...s, retryInMs: ms }, effects: [...before, { type: 'SetTimer', ms }] };
}

/** At the server's pace for five polls, then twice as long each time, up to maxPollMs (never sooner than asked). */
export function pollDelay(baseMs: number, checks: number, c: MachineConfig): number {
  const extra = Math.max(0, checks - 4);
  return Math.max(baseMs, Math.min(baseMs * 2 ** extra, c.maxPollMs));
}

export function liveNext(s: ChargerState, p: ChargePayload, c: MachineConfig): Step {
  if (!followed(s)) return same(s);
  if (p.status !== 'PROCESSING') return payload(s, p, c);
  if (s.kind === 'paused') return same(s);
  const effects: Effect[] = [];
  const st = waiting(s, { ...s, expiresAt: p.expiresAt ?? s.expiresAt }, p, effects);
  if (s.liveOpen) return st.kind !== s.kind || st.nextAction !== s.nextAction || st.expiresAt !== s.expiresAt ? { state: st, effects } : same(s);
  effects.push({ type: 'SetTimer', ms: c.liveRecheckMs });
  return { state: { ...st, liveOpen: true, retryInMs: c.liveRecheckMs }, effects };
}

export function liveFailed(s: ChargerState, _reason: string, c: MachineConfig): Step {
  if (!following(s.kind) || s.live === 'poll') return same(s);
  const ms = s.pollMs ?? c.pollMs;
  return {
    state: { ...s, live: 'poll', liveOpen: false, retryInMs: ms },
    effects: [{ type: 'Unsubscribe' }, { type: 'SetTimer', ms }],
  };
}

export function timerFired(s: ChargerState, now: number, c: MachineConfig): Step {
  if (s.kind === 'retrying') return resend(s, undefined);
  if (!following(s.kind)) return same(s);
  if (expired(s, now)) return unknown(s);
  if (s.live !== 'poll' && !s.liveOpen) {
    // The stream said nothing in time: poll for the rest of the attempt.
    return { state: { ...s, live: 'poll', liveOpen: false, retryInMs: 0 }, effects: [{ type: 'Unsubscribe' }, { type: 'AskStatus', key: s.key! }] };
  }
  return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'AskStatus', key: s.key! }] };
}

export function offline(s: ChargerState): Step {
  const st = { ...s, offline: true };
  if (s.remote) return same(st);
  if (s.kind === 'retrying') return pause(st, 'offline', 'retrying');
  if (following(s.kind)) return pause(st, 'offline', s.kind);
  if (s.kind === 'paused') return same({ ...st, pausedBy: 'offline' });
  return same(st); // sending: the request on the wire ends by itself; its failure then pauses
}

export function hidden(s: ChargerState): Step {
  const st = { ...s, hidden: true };
  if (s.remote) return same(st);
  if (s.kind === 'retrying') return pause(st, 'hidden', 'retrying');
  // A stream keeps working in a hidden tab; only polling waits for the shopper.
  if (following(s.kind) && s.live === 'poll') return pause(st, 'hidden', s.kind);
  return same(st);
}

function pause(s: ChargerState, by: 'offline' | 'hidden', from: 'retrying' | 'processing' | 'action'): Step {
  const st: ChargerState = { ...s, kind: 'paused', pausedBy: by, pausedFrom: from };
  delete st.retryInMs;
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (following(from) && s.live !== 'poll') effects.push({ type: 'Unsubscribe' });
  effects.push({ type: 'Emit', event: { type: 'pause', key: s.key!, reason: by } });
  return { state: st, effects };
}

/** Online or visible again: whatever waited runs at once (timers in hidden tabs are throttled). */
export function wake(s: ChargerState, now: number, c: MachineConfig): Step {
  if (s.remote) return same(s);
  if (s.kind === 'paused') {
    if (s.offline || (s.hidden && s.pausedBy === 'hidden')) return same({ ...s, pausedBy: s.offline ? 'offline' : 'hidden' });
    const emit: Effect = { type: 'Emit', event: { type: 'unpause', key: s.key! } };
    const st: ChargerState = { ...s };
    delete st.pausedBy;
    delete st.pausedFrom;
    if (following(s.pausedFrom)) {
      if (expired(s, now)) return unknown(st);
      // Ask at once; a PROCESSING answer follows the stream again if it can.
      const live = c.live === 'poll' ? 'poll' : s.live;
      return { state: { ...st, kind: s.pausedFrom, live: live ?? 'poll', liveOpen: false, retryInMs: 0 }, effects: [emit, { type: 'AskStatus', key: s.key! }] };
    }
    // A fresh budget: time offline or hidden was not spent waiting for the server.
    return resend(st, now, emit);
  }
  if (s.offline || s.hidden) return same(s);
  if (s.kind === 'retrying') return resend(s, undefined, { type: 'ClearTimer' });
  if (following(s.kind) && (s.live === 'poll' || s.liveOpen)) {
    return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'ClearTimer' }, { type: 'AskStatus', key: s.key! }] };
  }
  return same(s);
}


/**
 * handleNextAction(): to the bank's challenge page. The attempt is in this
 * tab's storage first (it is already, unless another tab sends it), so
 * that the return to the returnUrl finds its key and input.
 */
export function toNextAction(s: ChargerState, record: AttemptRecord | null): Step {
  if (s.kind !== 'action' || !s.nextAction) {
    return reply(s, { error: { type: 'state', state: s.kind, message: `handleNextAction() needs state action (the shopper must authenticate); the charger is ${s.kind}` } });
  }
  const effects = record?.key === s.key ? [] : persist(s, { status: 'open' });
  return { state: s, effects: [...effects, { type: 'Navigate', url: s.nextAction.url }, { type: 'Reply', result: { ok: null } }] };
}
