// The state machine's vocabulary: the events step() takes, the effects it
// returns for the runner to perform, how a waiting call ends, and the
// machine's settings. Types only, so that the transitions (machine.ts,
// starting.ts, following.ts, steps.ts), the runner (charger.ts) and the
// page's parts (crosstab.ts, wake.ts, live.ts) all import them from here
// and none of them from each other's files.
import type { ChargerEvent } from './events.js';
import type { AttemptRecord } from './record.js';
import type { Answer } from './transport.js';
import type { AttemptState, ChargeCardInput, ChargePayload, ChargerState, LiveMode, Outcome, RetryOptions, ServerError } from './types.js';

/**
 * What another tab says about the scope's attempt (over BroadcastChannel):
 * its state there. The receiving tab shows it with its own flags.
 */
export type Progress = AttemptState;

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
  | { type: 'Send'; key: string; input: ChargeCardInput; try: number }
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

export interface Step {
  state: ChargerState;
  effects: Effect[];
}
