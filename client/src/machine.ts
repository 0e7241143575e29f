// The charger as a pure function: step(state, event) → { state, effects }.
// Time, randomness (the jitter, a freshly minted key), what storage holds
// and whether this tab holds the scope's sender lock all come in with the
// event, so every transition is deterministic and tested as a table. The
// runner (charger.ts) performs the effects. The transitions live in
// starting.ts (pay, resume, another tab's progress) and following.ts
// (answers, PROCESSING, authentication, offline and hidden).
//
//   idle ──Pay──▶ sending ──SUCCEEDED/FAILED──▶ settled ──Reset──▶ idle
//                  │ ▲  ├──PROCESSING──▶ processing ──live / chargeStatus──▶ settled
//                  │ │  ├──PROCESSING + nextAction──▶ action ──live / chargeStatus──▶ settled
//                  │ │  │        (HandleNextAction: to the bank; the return resumes the same key)
//                  │ │  └──an error that is an answer──▶ rejected ──Reset──▶ idle
//                  ▼ │
//               retrying ──budget spent──▶ unknown ──Pay (same input) / Resume──▶ sending (same key)
//   offline, or hidden while waiting: paused ──Online / Visible──▶ the same key at once
//   idle ──Resume, no record, the return's key──▶ processing / action: chargeStatus only, never chargeCard
import { retryDefaults } from './backoff.js';
import { answered, hidden, liveFailed, liveNext, offline, statusAnswered, timerFired, toNextAction, wake } from './following.js';
import type { AttemptRecord } from './record.js';
import { leader, pay, remote, resume } from './starting.js';
import { flags, followed, progressOf, reply, same } from './steps.js';
import type { Answer } from './transport.js';
import type { ChargeCardInput, ChargePayload, ChargerState, LiveMode, NextAction, Outcome, RetryOptions, ServerError } from './types.js';
import type { ChargerEvent } from './events.js';

/** What another tab says about the scope's attempt (over BroadcastChannel). */
export interface Progress {
  kind: ChargerState['kind'];
  key?: string;
  input?: ChargeCardInput;
  outcome?: Outcome;
  error?: ServerError;
  expiresAt?: string;
  nextAction?: NextAction;
}

export type MachineEvent =
  /** pay(input). key: a fresh key, used only if a new attempt starts. record: what storage holds for the scope now. */
  | { type: 'Pay'; input: ChargeCardInput; key: string; record: AttemptRecord | null; leader: boolean; now: number }
  /** resume(). returnKey: chargeonce_key from the page's address (the return from the bank), if any. */
  | { type: 'Resume'; record: AttemptRecord | null; returnKey?: string; leader: boolean; now: number }
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
  /** handleNextAction(). record: what storage holds for the scope now. */
  | { type: 'HandleNextAction'; record: AttemptRecord | null }
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
  /** Takes the page to url (the bank's challenge page). */
  | { type: 'Navigate'; url: string }
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
          // A new key now could charge twice.
          message: `attempt ${s.key} is ${s.kind}: resume() it`,
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
    case 'HandleNextAction':
      return toNextAction(s, e.record);
  }
  if (s.remote) return same(s); // another tab sends; this one only listens
  switch (e.type) {
    case 'Answered':
      return s.kind === 'sending' ? answered(s, e.answer, e.now, e.jitter, c) : same(s);
    case 'StatusAnswered':
      return followed(s) ? statusAnswered(s, e.answer, e.now, c) : same(s);
    case 'LiveNext':
      return liveNext(s, e.payload, c);
    case 'LiveFailed':
      return liveFailed(s, e.reason, c);
    case 'TimerFired':
      return timerFired(s, e.now, c);
  }
}


export { progressOf };

function visibleChange(a: ChargerState, b: ChargerState): boolean {
  return (
    a.kind !== b.kind ||
    a.key !== b.key ||
    !a.remote !== !b.remote ||
    a.outcome !== b.outcome ||
    a.expiresAt !== b.expiresAt ||
    a.nextAction !== b.nextAction
  );
}

