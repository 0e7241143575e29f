// What the transitions share: the small results, and the few ways to make
// a state out of another (each kind built whole, with exactly its fields).
import type { Effect, MachineConfig, Result, Step } from './machine-types.js';
import type { AttemptRecord } from './record.js';
import type {
  Attempt,
  ChargeCardInput,
  ChargerFlags,
  ChargerState,
  FollowingState,
  IdleState,
  NextAction,
  Outcome,
  RetryingState,
  Run,
  SendableAttempt,
  SendingState,
  ServerError,
  UnknownState,
} from './types.js';

/** The kinds an open attempt of this tab's waits in. */
export type Open = SendingState | RetryingState | FollowingState;

/** idle, with s's offline and hidden flags: an idle tab follows no other. */
export function idle(s: ChargerState): IdleState {
  return { kind: 'idle', flags: own(s.flags), paused: false };
}

/** flags of a tab that leads its own attempt. */
export function own(flags: ChargerFlags): ChargerFlags {
  return { ...flags, follower: false };
}

/** s with some of its flags changed. */
export function withFlags<S extends ChargerState>(s: S, change: Partial<ChargerFlags>): S {
  return { ...s, flags: { ...s.flags, ...change } };
}

/** The attempt with nextAction as given (none when undefined): a new one, or none once it ended. */
export function withAction(a: Attempt, nextAction: NextAction | undefined): Attempt {
  const { key, input, expiresAt, sends } = a;
  return { key, input, sends, ...(expiresAt !== undefined && { expiresAt }), ...(nextAction && { nextAction }) };
}

/** The attempt with the server's expiresAt, when it gave one. */
export function expiring<A extends Attempt>(a: A, expiresAt: string | null | undefined): A {
  return expiresAt ? { ...a, expiresAt } : a;
}

export function sendable(a: Attempt): a is SendableAttempt {
  return a.input !== null;
}

/** The state's attempt's key; undefined when idle. */
export function keyOf(s: ChargerState): string | undefined {
  return s.kind === 'idle' ? undefined : s.attempt.key;
}

/** What the state's attempt charges (a waiting pay()'s input while idle). */
export function inputOf(s: ChargerState): ChargeCardInput | undefined {
  return s.kind === 'idle' ? s.waiting : (s.attempt.input ?? undefined);
}

/** The attempt stored in r, as this page takes it up: nothing sent from here yet. */
export function fromRecord(r: AttemptRecord): SendableAttempt {
  return { key: r.key, input: r.input, sends: 0, ...(r.expiresAt && { expiresAt: r.expiresAt }), ...(r.nextAction && { nextAction: r.nextAction }) };
}

/** A stream is open (or opening) for s: it must be closed when s ends or pauses. */
export function streaming(s: ChargerState): boolean {
  return s.kind === 'following' && !s.paused && s.live !== 'poll';
}

export function unknown(s: Open, error: ServerError | undefined = s.error): Step {
  const { key, expiresAt } = s.attempt;
  const st: UnknownState = { kind: 'unknown', attempt: s.attempt, ...(error && { error }), flags: s.flags, paused: false };
  const effects: Effect[] = [{ type: 'ClearTimer' }];
  if (streaming(s)) effects.push({ type: 'Unsubscribe' });
  effects.push({ type: 'Emit', event: { type: 'unknown', key, expiresAt } }, { type: 'Settle', result: { error: { type: 'unknown', key, expiresAt } } });
  return { state: st, effects };
}

/** key names the open attempt; '' while this tab has not heard which key another tab's attempt has. */
export function openError(key: string): Result {
  return { error: { type: 'open', key } };
}

export function rejectedResult(key: string, error: ServerError): Result {
  return { error: { type: 'rejected', key, error } };
}

/** The next try of the same run. */
export function nextTry(r: Run): Run {
  return { since: r.since, tries: r.tries + 1 };
}

/** A new run of sends, its budget starting now. */
export function freshRun(now: number): Run {
  return { since: now, tries: 1 };
}

/**
 * chargeCard once more with the attempt's own key and input, in run. s
 * gives the flags and the last error, and a retrying state its cause.
 */
export function resend(s: { flags: ChargerFlags; error?: ServerError | undefined; cause?: string }, a: SendableAttempt, run: Run, ...before: Effect[]): Step {
  const attempt: SendableAttempt = { ...a, sends: a.sends + 1 };
  const st: SendingState = { kind: 'sending', attempt, run, ...(s.cause && { cause: s.cause }), ...(s.error && { error: s.error }), flags: s.flags, paused: false };
  return { state: st, effects: [...before, { type: 'Send', key: a.key, input: a.input, try: attempt.sends }] };
}

/**
 * Follows s's key by asking chargeStatus at once, then polling: where
 * chargeCard must not go (the server may have forgotten the key; a key
 * adopted without its input) or need not (another tab's attempt, taken
 * over). A nextAction stays: the shopper still authenticates.
 */
export function ask(s: { attempt: Attempt; flags: ChargerFlags }, c: MachineConfig, ...before: Effect[]): Step {
  const st: FollowingState = {
    kind: 'following',
    attempt: s.attempt,
    live: 'poll',
    liveOpen: false,
    checks: 0,
    pollMs: c.pollMs,
    retryInMs: null,
    flags: own(s.flags),
    paused: false,
  };
  return { state: st, effects: [...before, { type: 'AskStatus', key: s.attempt.key }] };
}

/**
 * The Persist effect for the attempt. None for a key adopted without its
 * input: it is only ever asked about, and a record must hold what a
 * restart would send.
 */
export function persist(a: Attempt, r: { status: 'open' } | { status: 'settled'; outcome: Outcome }): Effect[] {
  if (!sendable(a)) return [];
  const record: AttemptRecord = {
    v: 1,
    key: a.key,
    scope: '',
    input: a.input,
    createdAt: 0,
    ...r,
    ...(a.expiresAt && { expiresAt: a.expiresAt }),
    ...(a.nextAction && { nextAction: a.nextAction }),
  };
  return [{ type: 'Persist', record }];
}

export function same(s: ChargerState): Step {
  return { state: s, effects: [] };
}

export function reply(s: ChargerState, result: Result): Step {
  return { state: s, effects: [{ type: 'Reply', result }] };
}
