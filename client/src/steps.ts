// What the transitions share: the small results and the state helpers.
import type { Effect, MachineConfig, Progress, Result, Step } from './machine-types.js';
import type { AttemptRecord } from './record.js';
import type { ChargerState, Outcome, StateKind } from './types.js';

export function unknown(s: ChargerState): Step {
  const st: ChargerState = { ...strip(s), error: s.error, kind: 'unknown' };
  const result: Result = { error: { type: 'unknown', key: s.key!, expiresAt: s.expiresAt } };
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (following(s.kind) && s.live !== 'poll') effects.push({ type: 'Unsubscribe' });
  effects.push({ type: 'Emit', event: { type: 'unknown', key: s.key!, expiresAt: s.expiresAt } }, { type: 'Settle', result });
  return { state: st, effects };
}

export function openError(key: string | undefined): Result {
  return { error: { type: 'open', key: key ?? '' } };
}

export function rejectedResult(s: ChargerState): Result {
  return { error: { type: 'rejected', key: s.key!, error: s.error! } };
}

/**
 * chargeCard once more with the attempt's own key and input. fresh: the
 * time a new run of sends begins (its budget starts then); without it,
 * one more try of the current run.
 */
export function resend(s: ChargerState, fresh: number | undefined, ...before: Effect[]): Step {
  const attempt = (s.attempt ?? 0) + 1;
  const run = fresh === undefined ? { tries: (s.tries ?? 1) + 1 } : { since: fresh, tries: 1 };
  return {
    state: { ...strip(s), error: s.error, kind: 'sending', attempt, ...run },
    effects: [...before, { type: 'Send', key: s.key!, input: s.input!, attempt }],
  };
}

/**
 * Follows s's key by asking chargeStatus at once, then polling: where
 * chargeCard must not go (the server may have forgotten the key; a key
 * adopted without its input) or need not (another tab's attempt, taken
 * over). While the shopper must authenticate, that stays the kind.
 */
export function ask(s: ChargerState, now: number, c: MachineConfig, ...before: Effect[]): Step {
  const st: ChargerState = { ...strip(s), kind: s.nextAction ? 'action' : 'processing', live: 'poll', checks: 0, pollMs: c.pollMs, since: now, tries: 1 };
  delete st.remote;
  return { state: st, effects: [...before, { type: 'AskStatus', key: s.key! }] };
}

/** The kinds that follow a PROCESSING attempt: live, or by polling chargeStatus. */
export function following(k: StateKind | ChargerState['pausedFrom']): k is 'processing' | 'action' {
  return k === 'processing' || k === 'action';
}

/** s follows a PROCESSING attempt, or did until it paused. */
export function followed(s: ChargerState): boolean {
  return following(s.kind) || (s.kind === 'paused' && following(s.pausedFrom));
}

/**
 * The Persist effect for s's attempt. None for a key adopted without its
 * input: it is only ever asked about, and a record must hold what a
 * restart would send.
 */
export function persist(s: ChargerState, r: { status: 'open' } | { status: 'settled'; outcome: Outcome }): Effect[] {
  if (!s.input) return [];
  const record: AttemptRecord = { v: 1, key: s.key!, scope: '', input: s.input, createdAt: 0, ...r };
  if (s.expiresAt) record.expiresAt = s.expiresAt;
  if (s.nextAction) record.nextAction = s.nextAction;
  return [{ type: 'Persist', record }];
}

export function same(s: ChargerState): Step {
  return { state: s, effects: [] };
}

export function reply(s: ChargerState, result: Result): Step {
  return { state: s, effects: [{ type: 'Reply', result }] };
}

const kept = ['key', 'input', 'expiresAt', 'nextAction', 'attempt', 'since', 'tries', 'remote', 'offline', 'hidden'] as const;

/** The attempt's identity and the tab's flags, without the bookkeeping of the state it leaves. */
export function strip(s: ChargerState): ChargerState {
  return pick(s, kept, { kind: s.kind });
}

/** next, with the tab's offline and hidden flags carried over from s. */
export function flags(s: ChargerState, next: ChargerState): ChargerState {
  return pick(s, ['offline', 'hidden'], { ...next });
}

/** into, with the fields of from named in keys that are set. */
function pick<T extends object, K extends keyof ChargerState>(from: ChargerState, keys: readonly K[], into: T): T {
  for (const k of keys) if (from[k] !== undefined && from[k] !== false) (into as Record<string, unknown>)[k] = from[k];
  return into;
}

export function progressOf(s: ChargerState): Progress {
  return pick(s, ['key', 'input', 'outcome', 'error', 'expiresAt', 'nextAction'], { kind: s.kind });
}
