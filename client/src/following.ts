// The transitions of an attempt on its way: chargeCard's and
// chargeStatus's answers, following PROCESSING live or by polling, timers,
// and pausing while offline or hidden.
import { retryWaitMs } from './backoff.js';
import { expired, type AttemptRecord } from './record.js';
import type { Effect, MachineConfig, Step } from './machine.js';
import { rejectedResult, resend, same, strip, unknown } from './steps.js';
import type { Answer } from './transport.js';
import type { ChargePayload, ChargerState, Outcome } from './types.js';

export function answered(s: ChargerState, a: Answer, now: number, jitter: number, c: MachineConfig): Step {
  if (a.kind === 'payload' && a.payload) return payload(s, a.payload, c);
  if (a.kind === 'error' && !a.retryable) {
    const st: ChargerState = { ...strip(s), kind: 'rejected', error: a.error };
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
    const record: AttemptRecord = { v: 1, key: s.key!, scope: '', input: s.input!, createdAt: 0, status: 'settled', outcome, ...known };
    const effects: Effect[] = [{ type: 'Persist', record }, { type: 'Settle', result: { ok: outcome } }];
    if (s.kind === 'processing' || s.pausedFrom === 'processing') effects.unshift({ type: 'ClearTimer' }, { type: 'Unsubscribe' });
    return { state: st, effects };
  }
  // PROCESSING: follow it, never send it again.
  const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : c.pollMs;
  const effects: Effect[] = [];
  if (p.expiresAt && p.expiresAt !== s.expiresAt) {
    effects.push({ type: 'Persist', record: { v: 1, key: s.key!, scope: '', input: s.input!, createdAt: 0, status: 'open', expiresAt: p.expiresAt } });
  }
  const base = { ...strip(s), ...known, kind: 'processing' as const, pollMs, checks: 0 };
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
      // The server knows no such key: the attempt never reached it, or its stored result is gone.
      if (expired(s, now)) return unknown(s);
      return resend(s, now, { type: 'Unsubscribe' });
    }
    if (s.kind === 'paused') return same({ ...s, pollMs: p.retryAfterMs || s.pollMs || c.pollMs, checks });
    const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : (s.pollMs ?? c.pollMs);
    const expiresAt = p.expiresAt ?? s.expiresAt;
    return nextCheck({ ...s, pollMs, checks, expiresAt }, c);
  }
  if (a.kind === 'error' && !a.retryable) return unknown({ ...s, error: a.error });
  if (s.kind === 'paused') return same({ ...s, checks });
  // No answer, or a busy server: keep asking at the slower pace.
  return nextCheck({ ...s, checks, ...(a.kind === 'error' ? { error: a.error } : {}) }, c);
}

/** Waits for the next chargeStatus: the stream's recheck while it is open, else the poll pace, slowing down. */
function nextCheck(s: ChargerState, c: MachineConfig): Step {
  const ms = s.live !== 'poll' && s.liveOpen ? c.liveRecheckMs : pollDelay(s.pollMs ?? c.pollMs, s.checks ?? 0, c);
  return { state: { ...s, kind: 'processing', retryInMs: ms }, effects: [{ type: 'SetTimer', ms }] };
}

/** At the server's pace for five polls, then twice as long each time, up to maxPollMs (never sooner than asked). */
export function pollDelay(baseMs: number, checks: number, c: MachineConfig): number {
  const extra = Math.max(0, checks - 4);
  return Math.max(baseMs, Math.min(baseMs * 2 ** extra, c.maxPollMs));
}

export function liveNext(s: ChargerState, p: ChargePayload, c: MachineConfig): Step {
  if (s.kind !== 'processing' && !(s.kind === 'paused' && s.pausedFrom === 'processing')) return same(s);
  if (p.status !== 'PROCESSING') return payload(s, p, c);
  if (s.liveOpen || s.kind === 'paused') return same(s);
  return { state: { ...s, liveOpen: true, retryInMs: c.liveRecheckMs }, effects: [{ type: 'SetTimer', ms: c.liveRecheckMs }] };
}

export function liveFailed(s: ChargerState, _reason: string, c: MachineConfig): Step {
  if (s.kind !== 'processing' || s.live === 'poll') return same(s);
  const ms = s.pollMs ?? c.pollMs;
  return {
    state: { ...s, live: 'poll', liveOpen: false, retryInMs: ms },
    effects: [{ type: 'Unsubscribe' }, { type: 'SetTimer', ms }],
  };
}

export function timerFired(s: ChargerState, now: number, c: MachineConfig): Step {
  if (s.kind === 'retrying') return resend(s, undefined);
  if (s.kind !== 'processing') return same(s);
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
  if (s.kind === 'processing') return pause(st, 'offline', 'processing');
  if (s.kind === 'paused') return same({ ...st, pausedBy: 'offline' });
  return same(st); // sending: the request on the wire ends by itself; its failure then pauses
}

export function hidden(s: ChargerState): Step {
  const st = { ...s, hidden: true };
  if (s.remote) return same(st);
  if (s.kind === 'retrying') return pause(st, 'hidden', 'retrying');
  // A stream keeps working in a hidden tab; only polling waits for the shopper.
  if (s.kind === 'processing' && s.live === 'poll') return pause(st, 'hidden', 'processing');
  return same(st);
}

function pause(s: ChargerState, by: 'offline' | 'hidden', from: 'retrying' | 'processing'): Step {
  const st: ChargerState = { ...s, kind: 'paused', pausedBy: by, pausedFrom: from };
  delete st.retryInMs;
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (from === 'processing' && s.live !== 'poll') effects.push({ type: 'Unsubscribe' });
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
    if (s.pausedFrom === 'processing') {
      if (expired(s, now)) return unknown(st);
      // Ask at once; a PROCESSING answer follows the stream again if it can.
      const live = c.live === 'poll' ? 'poll' : s.live;
      return { state: { ...st, kind: 'processing', live: live ?? 'poll', liveOpen: false, retryInMs: 0 }, effects: [emit, { type: 'AskStatus', key: s.key! }] };
    }
    // A fresh budget: time offline or hidden was not spent waiting for the server.
    return resend(st, now, emit);
  }
  if (s.offline || s.hidden) return same(s);
  if (s.kind === 'retrying') return resend(s, undefined, { type: 'ClearTimer' });
  if (s.kind === 'processing' && (s.live === 'poll' || s.liveOpen)) {
    return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'ClearTimer' }, { type: 'AskStatus', key: s.key! }] };
  }
  return same(s);
}

