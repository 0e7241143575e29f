// The charger as a pure function: step(state, event) → { state, effects }.
// Time, randomness (the jitter, a freshly minted key), what storage holds
// and whether this tab holds the scope's sender lock all come in with the
// event, so every transition is deterministic and tested as a table. The
// runner (charger.ts) performs the effects.
//
//   idle ──Pay──▶ sending ──SUCCEEDED/FAILED──▶ settled ──Reset──▶ idle
//                  │ ▲  ├──PROCESSING──▶ processing ──live / chargeStatus──▶ settled
//                  │ │  └──an error that is an answer──▶ rejected ──Reset──▶ idle
//                  ▼ │
//               retrying ──budget spent──▶ unknown ──Pay (same input) / Resume──▶ sending (same key)
//   offline, or hidden while waiting: paused ──Online / Visible──▶ the same key at once
import { retryDefaults, retryWaitMs } from './backoff.js';
import { expired, sameInput, type AttemptRecord } from './record.js';
import type { Answer } from './transport.js';
import type { ChargeCardInput, ChargePayload, ChargerState, LiveMode, Outcome, RetryOptions, ServerError } from './types.js';
import type { ChargerEvent } from './events.js';

/** What another tab says about the scope's attempt (over BroadcastChannel). */
export interface Progress {
  kind: ChargerState['kind'];
  key?: string;
  input?: ChargeCardInput;
  outcome?: Outcome;
  error?: ServerError;
  expiresAt?: string;
}

export type MachineEvent =
  /** pay(input). key: a fresh key, used only if a new attempt starts. record: what storage holds for the scope now. */
  | { type: 'Pay'; input: ChargeCardInput; key: string; record: AttemptRecord | null; leader: boolean; now: number }
  | { type: 'Resume'; record: AttemptRecord | null; leader: boolean; now: number }
  /** chargeCard's answer. */
  | { type: 'Answered'; answer: Answer; now: number; jitter: number }
  /** chargeStatus's answer. */
  | { type: 'StatusAnswered'; answer: Answer; now: number; jitter: number }
  | { type: 'LiveNext'; payload: ChargePayload; now: number }
  | { type: 'LiveFailed'; reason: string; now: number }
  | { type: 'TimerFired'; now: number }
  | { type: 'Online'; now: number }
  | { type: 'Offline'; now: number }
  | { type: 'Visible'; now: number }
  | { type: 'Hidden'; now: number }
  | { type: 'Reset' }
  /** A pay() caller stopped waiting: the attempt goes on. */
  | { type: 'Abort' }
  | { type: 'RemoteProgress'; progress: Progress; now: number }
  /** This tab got the scope's sender lock after another tab held it. */
  | { type: 'Leader'; key: string; record: AttemptRecord | null; now: number };

/** How a pay()/resume() promise ends: data, turned into the exported error classes by the runner. */
export type Result =
  | { ok: Outcome | null }
  | { error: { type: 'rejected'; key: string; error: ServerError } }
  | { error: { type: 'unknown'; key: string; expiresAt?: string } }
  | { error: { type: 'open'; key: string } }
  | { error: { type: 'state'; state: string; message: string } };

export type Effect =
  | { type: 'Persist'; record: AttemptRecord }
  | { type: 'Forget' }
  | { type: 'Send'; key: string; input: ChargeCardInput; attempt: number }
  | { type: 'AskStatus'; key: string }
  | { type: 'Subscribe'; key: string; mode: Exclude<LiveMode, 'poll'> }
  | { type: 'Unsubscribe' }
  | { type: 'SetTimer'; ms: number }
  | { type: 'ClearTimer' }
  | { type: 'Broadcast'; progress: Progress }
  | { type: 'Emit'; event: ChargerEvent }
  /** Ends every promise waiting on the attempt (pay() and resume() callers). */
  | { type: 'Settle'; result: Result }
  /** Ends only the promise of the call that sent this event. */
  | { type: 'Reply'; result: Result };

export interface MachineConfig {
  retry: Required<RetryOptions>;
  live: LiveMode;
  /** How long a stream may take to say anything before the charger polls instead. */
  liveConnectMs: number;
  /** While a stream is open, how often chargeStatus is asked anyway (a connection can die without a word). */
  liveRecheckMs: number;
  /** The poll pace when PROCESSING came without retryAfterMs. */
  pollMs: number;
  /** Polling slows down to this after a few polls at the server's pace. */
  maxPollMs: number;
}

export const machineDefaults: Readonly<MachineConfig> = {
  retry: retryDefaults,
  live: 'sse',
  liveConnectMs: 3_000,
  liveRecheckMs: 15_000,
  pollMs: 1_000,
  maxPollMs: 15_000,
};

export const initialState: ChargerState = { kind: 'idle' };

export interface Step {
  state: ChargerState;
  effects: Effect[];
}

/** The one transition function. It never throws and never reads a clock. */
export function step(s: ChargerState, e: MachineEvent, c: MachineConfig = machineDefaults): Step {
  const out = transition(s, e, c);
  // Other tabs hear of every change this tab makes to the attempt.
  if (!out.state.remote && out.state.key && visibleChange(s, out.state)) {
    out.effects.push({ type: 'Broadcast', progress: progressOf(out.state) });
  }
  return out;
}

function transition(s: ChargerState, e: MachineEvent, c: MachineConfig): Step {
  switch (e.type) {
    case 'Pay':
      return pay(s, e, c);
    case 'Resume':
      return resume(s, e, c);
    case 'Reset':
      if (s.kind === 'settled' || s.kind === 'rejected' || s.kind === 'idle') {
        return { state: flags(s, initialState), effects: s.remote || s.kind === 'idle' ? [] : [{ type: 'Forget' }] };
      }
      return reply(s, {
        error: {
          type: 'state',
          state: s.kind,
          message:
            s.kind === 'unknown'
              ? `the outcome of attempt ${s.key} is unknown: resume() it; a new key now could charge twice`
              : `attempt ${s.key} is still open: reset() is for a settled or rejected attempt`,
        },
      });
    case 'Abort':
      return { state: s, effects: s.key ? [{ type: 'Emit', event: { type: 'abort', key: s.key } }] : [] };
    case 'Offline':
      return offline(s);
    case 'Hidden':
      return hidden(s);
    case 'Online':
      return wake({ ...s, offline: false }, e.now, c);
    case 'Visible':
      return wake({ ...s, hidden: false }, e.now, c);
    case 'RemoteProgress':
      return remote(s, e.progress);
    case 'Leader':
      return leader(s, e, c);
  }
  if (s.remote) return same(s); // another tab sends; this one only listens
  switch (e.type) {
    case 'Answered':
      return s.kind === 'sending' ? answered(s, e.answer, e.now, e.jitter, c) : same(s);
    case 'StatusAnswered':
      return s.kind === 'processing' || (s.kind === 'paused' && s.pausedFrom === 'processing')
        ? statusAnswered(s, e.answer, e.now, c)
        : same(s);
    case 'LiveNext':
      return liveNext(s, e.payload, c);
    case 'LiveFailed':
      return liveFailed(s, e.reason, c);
    case 'TimerFired':
      return timerFired(s, e.now, c);
  }
}

// ---- starting and resuming -------------------------------------------------

function pay(s: ChargerState, e: Extract<MachineEvent, { type: 'Pay' }>, c: MachineConfig): Step {
  switch (s.kind) {
    case 'sending':
    case 'retrying':
    case 'paused':
    case 'processing':
      // Open in this tab (or followed from another): the same input waits for it, another is refused.
      return sameInput(s.input!, e.input) ? same(s) : reply(s, openError(s.key));
    case 'unknown':
      if (!sameInput(s.input!, e.input)) return reply(s, openError(s.key));
      return e.leader ? restart(s, e.now, c) : same({ ...s, remote: true });
    case 'settled':
    case 'rejected':
      if (!sameInput(s.input!, e.input)) {
        return reply(s, { error: { type: 'state', state: s.kind, message: `attempt ${s.key} is ${s.kind}: reset() before paying with another input` } });
      }
      return reply(s, s.kind === 'settled' ? { ok: s.outcome! } : rejectedResult(s));
  }
  // idle: what storage holds, then a new attempt.
  const r = e.record;
  if (r?.status === 'open') {
    if (!sameInput(r.input, e.input)) return reply(s, openError(r.key));
    const adopted = flags(s, { kind: 'unknown', key: r.key, input: r.input, ...(r.expiresAt ? { expiresAt: r.expiresAt } : {}), attempt: 0 });
    return e.leader ? restart(adopted, e.now, c, r) : same({ ...adopted, kind: 'sending', remote: true });
  }
  if (r?.status === 'settled' && r.outcome?.status === 'SUCCEEDED' && sameInput(r.input, e.input)) {
    const st = flags(s, { kind: 'settled', key: r.key, input: r.input, outcome: r.outcome, ...(r.expiresAt ? { expiresAt: r.expiresAt } : {}) });
    return reply(st, { ok: r.outcome });
  }
  if (!e.leader) {
    // Another tab holds the scope's sender lock: wait for its word, never mint.
    return same(flags(s, { kind: 'sending', input: e.input, remote: true }));
  }
  const effects: Effect[] = r ? [{ type: 'Forget' }] : [];
  const record: AttemptRecord = { v: 1, key: e.key, scope: '', input: e.input, createdAt: e.now, status: 'open' };
  const st = flags(s, { kind: 'sending', key: e.key, input: e.input, attempt: 1, since: e.now, tries: 1 });
  effects.push({ type: 'Persist', record }, { type: 'Send', key: e.key, input: e.input, attempt: 1 });
  return { state: st, effects };
}

function resume(s: ChargerState, e: Extract<MachineEvent, { type: 'Resume' }>, c: MachineConfig): Step {
  switch (s.kind) {
    case 'settled':
      return reply(s, { ok: s.outcome! });
    case 'rejected':
      return reply(s, { ok: null });
    case 'unknown':
      return e.leader ? restart(s, e.now, c) : same({ ...s, remote: true });
    case 'idle':
      break;
    default:
      return same(s); // already running: the caller waits for it
  }
  const r = e.record;
  if (!r) return reply(s, { ok: null });
  const known = { key: r.key, input: r.input, ...(r.expiresAt ? { expiresAt: r.expiresAt } : {}) };
  if (r.status === 'settled') return reply(flags(s, { kind: 'settled', ...known, outcome: r.outcome! }), { ok: r.outcome! });
  const adopted = flags(s, { kind: 'unknown', ...known, attempt: 0 });
  return e.leader ? restart(adopted, e.now, c, r) : same({ ...adopted, kind: 'sending', remote: true });
}

/**
 * Runs an open attempt again with its own key and input: chargeCard once
 * more (the server replays its result or answers PROCESSING), or, once the
 * server may have forgotten the key (expiresAt passed), only chargeStatus,
 * since chargeCard would then start a new attempt.
 */
function restart(s: ChargerState, now: number, c: MachineConfig, rec?: AttemptRecord): Step {
  const base: ChargerState = strip({ ...s, remote: false, since: now, tries: 1 });
  const effects: Effect[] = [];
  if (rec) effects.push({ type: 'Persist', record: rec }); // it may come from another tab's storage: keep it here too
  if (expired(s, now)) {
    return { state: { ...base, kind: 'processing', live: 'poll', checks: 0, pollMs: c.pollMs }, effects: [...effects, { type: 'AskStatus', key: s.key! }] };
  }
  const attempt = (s.attempt ?? 0) + 1;
  return { state: { ...base, kind: 'sending', attempt }, effects: [...effects, { type: 'Send', key: s.key!, input: s.input!, attempt }] };
}

function leader(s: ChargerState, e: Extract<MachineEvent, { type: 'Leader' }>, c: MachineConfig): Step {
  if (!s.remote || s.kind === 'settled' || s.kind === 'rejected' || s.kind === 'idle') return same(s);
  if (s.key) {
    // Take over the other tab's attempt by asking first: its final word may still be on its way here.
    const effects: Effect[] = e.record?.key === s.key ? [{ type: 'Persist', record: e.record }] : [];
    const st: ChargerState = { ...strip({ ...s, remote: false }), kind: 'processing', live: 'poll', checks: 0, pollMs: c.pollMs, since: e.now, tries: 1 };
    delete st.remote;
    return { state: st, effects: [...effects, { type: 'AskStatus', key: s.key }] };
  }
  // We never heard which key the other tab used: storage may know; else this tab starts the attempt.
  return pay(flags(s, initialState), { type: 'Pay', input: s.input!, key: e.key, record: e.record, leader: true, now: e.now }, c);
}

// ---- answers -----------------------------------------------------------------

function answered(s: ChargerState, a: Answer, now: number, jitter: number, c: MachineConfig): Step {
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
  const known = { ...(expiresAt ? { expiresAt } : {}) };
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

function statusAnswered(s: ChargerState, a: Answer, now: number, c: MachineConfig): Step {
  const checks = (s.checks ?? 0) + 1;
  if (a.kind === 'payload') {
    const p = a.payload;
    if (p && p.status !== 'PROCESSING') return payload(s, p, c);
    if (!p) {
      // The server knows no such key: the attempt never reached it, or its stored result is gone.
      if (expired(s, now)) return unknown(s);
      const attempt = (s.attempt ?? 0) + 1;
      return {
        state: { ...strip(s), kind: 'sending', attempt, since: now, tries: 1 },
        effects: [{ type: 'Unsubscribe' }, { type: 'Send', key: s.key!, input: s.input!, attempt }],
      };
    }
    if (s.kind === 'paused') return same({ ...s, pollMs: p.retryAfterMs || s.pollMs || c.pollMs, checks });
    const pollMs = p.retryAfterMs && p.retryAfterMs > 0 ? p.retryAfterMs : (s.pollMs ?? c.pollMs);
    const expiresAt = p.expiresAt ?? s.expiresAt;
    return nextCheck({ ...s, pollMs, checks, ...(expiresAt ? { expiresAt } : {}) }, c);
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

function liveNext(s: ChargerState, p: ChargePayload, c: MachineConfig): Step {
  if (s.kind !== 'processing' && !(s.kind === 'paused' && s.pausedFrom === 'processing')) return same(s);
  if (p.status !== 'PROCESSING') return payload(s, p, c);
  if (s.liveOpen || s.kind === 'paused') return same(s);
  return { state: { ...s, liveOpen: true, retryInMs: c.liveRecheckMs }, effects: [{ type: 'SetTimer', ms: c.liveRecheckMs }] };
}

function liveFailed(s: ChargerState, _reason: string, c: MachineConfig): Step {
  if (s.kind !== 'processing' || s.live === 'poll') return same(s);
  const ms = s.pollMs ?? c.pollMs;
  return {
    state: { ...s, live: 'poll', liveOpen: false, retryInMs: ms },
    effects: [{ type: 'Unsubscribe' }, { type: 'SetTimer', ms }],
  };
}

function timerFired(s: ChargerState, now: number, c: MachineConfig): Step {
  if (s.kind === 'retrying') {
    const attempt = (s.attempt ?? 1) + 1;
    return {
      state: { ...strip(s), ...(s.error ? { error: s.error } : {}), kind: 'sending', attempt, tries: (s.tries ?? 1) + 1 },
      effects: [{ type: 'Send', key: s.key!, input: s.input!, attempt }],
    };
  }
  if (s.kind !== 'processing') return same(s);
  if (expired(s, now)) return unknown(s);
  if (s.live !== 'poll' && !s.liveOpen) {
    // The stream said nothing in time: poll for the rest of the attempt.
    return { state: { ...s, live: 'poll', liveOpen: false, retryInMs: 0 }, effects: [{ type: 'Unsubscribe' }, { type: 'AskStatus', key: s.key! }] };
  }
  return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'AskStatus', key: s.key! }] };
}

// ---- offline, hidden, back -------------------------------------------------

function offline(s: ChargerState): Step {
  const st = { ...s, offline: true };
  if (s.remote) return same(st);
  if (s.kind === 'retrying') return pause(st, 'offline', 'retrying');
  if (s.kind === 'processing') return pause(st, 'offline', 'processing');
  if (s.kind === 'paused') return same({ ...st, pausedBy: 'offline' });
  return same(st); // sending: the request on the wire ends by itself; its failure then pauses
}

function hidden(s: ChargerState): Step {
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
function wake(s: ChargerState, now: number, c: MachineConfig): Step {
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
    const attempt = (s.attempt ?? 1) + 1;
    return {
      state: { ...strip(st), ...(s.error ? { error: s.error } : {}), kind: 'sending', attempt, since: now, tries: 1 },
      effects: [emit, { type: 'Send', key: s.key!, input: s.input!, attempt }],
    };
  }
  if (s.offline || s.hidden) return same(s);
  if (s.kind === 'retrying') {
    const attempt = (s.attempt ?? 1) + 1;
    return {
      state: { ...strip(s), kind: 'sending', attempt, tries: (s.tries ?? 1) + 1 },
      effects: [{ type: 'ClearTimer' }, { type: 'Send', key: s.key!, input: s.input!, attempt }],
    };
  }
  if (s.kind === 'processing' && (s.live === 'poll' || s.liveOpen)) {
    return { state: { ...s, retryInMs: 0 }, effects: [{ type: 'ClearTimer' }, { type: 'AskStatus', key: s.key! }] };
  }
  return same(s);
}

// ---- other tabs ----------------------------------------------------------

function remote(s: ChargerState, p: Progress): Step {
  // This tab's own attempt is its own business; a tab that is idle, or waits on another, shows the other's.
  if (!s.remote && s.kind !== 'idle') return same(s);
  if (!p.key || !p.input) return same(s);
  if (p.kind === 'idle') return same(s);
  const st: ChargerState = flags(s, { kind: p.kind, key: p.key, input: p.input, remote: true });
  if (p.outcome) st.outcome = p.outcome;
  if (p.error) st.error = p.error;
  if (p.expiresAt) st.expiresAt = p.expiresAt;
  const effects: Effect[] = [];
  if (s.remote && s.input && !sameInput(s.input, p.input)) effects.push({ type: 'Settle', result: openError(p.key) });
  else if (p.kind === 'settled' && p.outcome) effects.push({ type: 'Settle', result: { ok: p.outcome } });
  else if (p.kind === 'rejected' && p.error) effects.push({ type: 'Settle', result: rejectedResult(st) });
  else if (p.kind === 'unknown') effects.push({ type: 'Settle', result: { error: { type: 'unknown', key: p.key, ...(p.expiresAt ? { expiresAt: p.expiresAt } : {}) } } });
  return { state: st, effects };
}

// ---- helpers -------------------------------------------------------------

function unknown(s: ChargerState): Step {
  const st: ChargerState = { ...strip(s), ...(s.error ? { error: s.error } : {}), kind: 'unknown' };
  const result: Result = { error: { type: 'unknown', key: s.key!, ...(s.expiresAt ? { expiresAt: s.expiresAt } : {}) } };
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (s.kind === 'processing' && s.live !== 'poll') effects.push({ type: 'Unsubscribe' });
  effects.push({ type: 'Emit', event: { type: 'unknown', key: s.key!, ...(s.expiresAt ? { expiresAt: s.expiresAt } : {}) } }, { type: 'Settle', result });
  return { state: st, effects };
}

function openError(key: string | undefined): Result {
  return { error: { type: 'open', key: key ?? '' } };
}

function rejectedResult(s: ChargerState): Result {
  return { error: { type: 'rejected', key: s.key!, error: s.error! } };
}

function same(s: ChargerState): Step {
  return { state: s, effects: [] };
}

function reply(s: ChargerState, result: Result): Step {
  return { state: s, effects: [{ type: 'Reply', result }] };
}

const kept = ['key', 'input', 'expiresAt', 'attempt', 'since', 'tries', 'remote', 'offline', 'hidden'] as const;

/** The attempt's identity and the tab's flags, without the bookkeeping of the state it leaves. */
function strip(s: ChargerState): ChargerState {
  return pick(s, kept, { kind: s.kind });
}

/** next, with the tab's offline and hidden flags carried over from s. */
function flags(s: ChargerState, next: ChargerState): ChargerState {
  return pick(s, ['offline', 'hidden'], { ...next });
}

/** into, with the fields of from named in keys that are set. */
function pick<T extends object, K extends keyof ChargerState>(from: ChargerState, keys: readonly K[], into: T): T {
  for (const k of keys) if (from[k] !== undefined && from[k] !== false) (into as Record<string, unknown>)[k] = from[k];
  return into;
}

function visibleChange(a: ChargerState, b: ChargerState): boolean {
  return a.kind !== b.kind || a.key !== b.key || !a.remote !== !b.remote || a.outcome !== b.outcome || a.expiresAt !== b.expiresAt;
}

export function progressOf(s: ChargerState): Progress {
  return pick(s, ['key', 'input', 'outcome', 'error', 'expiresAt'], { kind: s.kind });
}
