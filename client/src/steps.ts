// What the transitions share: the small results and the state helpers.
import type { Effect, Progress, Result, Step } from './machine.js';
import type { ChargerState } from './types.js';

export function unknown(s: ChargerState): Step {
  const st: ChargerState = { ...strip(s), error: s.error, kind: 'unknown' };
  const result: Result = { error: { type: 'unknown', key: s.key!, expiresAt: s.expiresAt } };
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (s.kind === 'processing' && s.live !== 'poll') effects.push({ type: 'Unsubscribe' });
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

export function same(s: ChargerState): Step {
  return { state: s, effects: [] };
}

export function reply(s: ChargerState, result: Result): Step {
  return { state: s, effects: [{ type: 'Reply', result }] };
}

const kept = ['key', 'input', 'expiresAt', 'attempt', 'since', 'tries', 'remote', 'offline', 'hidden'] as const;

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
  return pick(s, ['key', 'input', 'outcome', 'error', 'expiresAt'], { kind: s.kind });
}
