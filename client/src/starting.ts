// The transitions that start an attempt or take one up: pay(), resume()
// (with the key the return from the bank carries, when storage lost the
// attempt), this tab getting the sender lock, and another tab's progress.
import { expired, sameInput, type AttemptRecord } from './record.js';
import type { Effect, MachineConfig, MachineEvent, Progress, Step } from './machine-types.js';
import { ask, freshRun, fromRecord, idle, openError, own, rejectedResult, reply, resend, same, sendable } from './steps.js';
import type { ChargerState, IdleState, SendingState, SettledState, UnknownState } from './types.js';

export function pay(s: ChargerState, e: Extract<MachineEvent, { type: 'Pay' }>, c: MachineConfig): Step {
  switch (s.kind) {
    case 'sending':
    case 'retrying':
    case 'following':
      // Open in this tab (or followed from another): the same input waits for it, another is refused
      // (and so is any input for a key adopted without one).
      return sameInput(s.attempt.input, e.input) ? same(s) : reply(s, openError(s.attempt.key));
    case 'unknown':
      if (!sameInput(s.attempt.input, e.input)) return reply(s, openError(s.attempt.key));
      return e.leader ? restart(s, e.now, c) : same(follow(s));
    case 'settled':
    case 'rejected':
      if (!sameInput(s.attempt.input, e.input)) {
        return reply(s, { error: { type: 'state', state: s.kind, message: `attempt ${s.attempt.key} is ${s.kind}: reset() first` } });
      }
      return reply(s, s.kind === 'settled' ? { ok: s.outcome } : rejectedResult(s.attempt.key, s.error));
    case 'idle':
      // Waiting for another tab's word: the same input goes on waiting, another is refused (no key heard yet).
      if (s.waiting) return sameInput(s.waiting, e.input) ? same(s) : reply(s, openError(''));
  }
  // idle: what storage holds, then a new attempt.
  const r = e.record;
  if (r?.status === 'open') {
    if (!sameInput(r.input, e.input)) return reply(s, openError(r.key));
    return adopt(s, r, e.leader, e.now, c);
  }
  if (r?.status === 'settled' && r.outcome?.status === 'SUCCEEDED' && sameInput(r.input, e.input)) {
    return reply(settledFrom(s, r, r.outcome), { ok: r.outcome });
  }
  if (!e.leader) {
    // Another tab holds the scope's sender lock: wait for its word, never mint.
    const st: IdleState = { kind: 'idle', waiting: e.input, flags: { ...s.flags, follower: true }, paused: false };
    return same(st);
  }
  const effects: Effect[] = r ? [{ type: 'Forget' }] : [];
  const record: AttemptRecord = { v: 1, key: e.key, scope: '', input: e.input, createdAt: e.now, status: 'open' };
  const st: SendingState = { kind: 'sending', attempt: { key: e.key, input: e.input, sends: 1 }, run: freshRun(e.now), flags: s.flags, paused: false };
  effects.push({ type: 'Persist', record }, { type: 'Send', key: e.key, input: e.input, try: 1 });
  return { state: st, effects };
}

export function resume(s: ChargerState, e: Extract<MachineEvent, { type: 'Resume' }>, c: MachineConfig): Step {
  switch (s.kind) {
    case 'settled':
      return reply(s, { ok: s.outcome });
    case 'rejected':
      return reply(s, { ok: null });
    case 'unknown':
      return e.leader ? restart(s, e.now, c) : same(follow(s));
    case 'idle':
      if (s.waiting) return same(s); // waits for another tab's attempt already
      break;
    default:
      return same(s); // already running: the caller waits for it
  }
  const r = e.record;
  if (!r) {
    // Storage lost the attempt (another browser profile, storage cleared, a private window), but the
    // return from the bank names its key: follow it by asking only, with no input, so never chargeCard.
    return e.returnKey ? ask({ attempt: { key: e.returnKey, input: null, sends: 0 }, flags: s.flags }, c) : reply(s, { ok: null });
  }
  if (r.status === 'settled' && r.outcome) return reply(settledFrom(s, r, r.outcome), { ok: r.outcome });
  return adopt(s, r, e.leader, e.now, c);
}

function settledFrom(s: ChargerState, r: AttemptRecord, outcome: SettledState['outcome']): SettledState {
  return { kind: 'settled', attempt: fromRecord(r), outcome, flags: own(s.flags), paused: false };
}

/**
 * Takes up the open attempt in storage: this tab runs it again when it
 * holds the sender lock; else it shows it as sending while the tab that
 * holds the lock (and sends it) has its say.
 */
function adopt(s: ChargerState, r: AttemptRecord, leader: boolean, now: number, c: MachineConfig): Step {
  const attempt = fromRecord(r);
  if (leader) return restart({ kind: 'unknown', attempt, flags: s.flags, paused: false }, now, c, r);
  const st: SendingState = { kind: 'sending', attempt, run: { since: now, tries: 0 }, flags: { ...s.flags, follower: true }, paused: false };
  return same(st);
}

function follow(s: UnknownState): UnknownState {
  return { ...s, flags: { ...s.flags, follower: true } };
}

/**
 * Runs an open attempt again with its own key and input: chargeCard once
 * more (the server replays its result, or answers PROCESSING, reading the
 * provider if the shopper was authenticating), or, once the server may
 * have forgotten the key (expiresAt passed), only chargeStatus, since
 * chargeCard would then start a new attempt. A key adopted without its
 * input is only ever asked about.
 */
function restart(s: UnknownState, now: number, c: MachineConfig, rec?: AttemptRecord): Step {
  const mine: UnknownState = { ...s, flags: own(s.flags) };
  const effects: Effect[] = [];
  if (rec) effects.push({ type: 'Persist', record: rec }); // it may come from another tab's storage: keep it here too
  const a = s.attempt;
  if (!sendable(a) || expired(a, now)) return ask(mine, c, ...effects);
  return resend(mine, a, freshRun(now), ...effects);
}

export function leader(s: ChargerState, e: Extract<MachineEvent, { type: 'Leader' }>, c: MachineConfig): Step {
  if (!s.flags.follower || s.kind === 'settled' || s.kind === 'rejected') return same(s);
  if (s.kind === 'idle') {
    // We never heard which key the other tab used: storage may know; else this tab starts the attempt.
    if (!s.waiting) return same(s);
    return pay(idle(s), { type: 'Pay', input: s.waiting, key: e.key, record: e.record, leader: true, now: e.now }, c);
  }
  // Take over the other tab's attempt by asking first: its final word may still be on its way here.
  const effects: Effect[] = e.record?.key === s.attempt.key ? [{ type: 'Persist', record: e.record }] : [];
  return ask(s, c, ...effects);
}

export function remote(s: ChargerState, p: Progress): Step {
  // This tab's own attempt is its own business; a tab that is idle, or waits on another, shows the other's.
  if (!s.flags.follower && s.kind !== 'idle') return same(s);
  // A key adopted without its input is not an attempt to share.
  if (p.attempt.input === null) return same(s);
  // An idle tab takes up another's attempt only while it is open: a final
  // one is over, and taking it would refuse this tab's next pay() until a
  // reset(), even a pay() made right after its own reset(), when the word
  // of the attempt it reset arrives late. A pay() of the same input still
  // finds the outcome in storage.
  if (s.kind === 'idle' && !s.waiting && (p.kind === 'settled' || p.kind === 'rejected')) return same(s);
  // The other tab's state as it is there; this tab's own flags.
  const st: ChargerState = { ...p, flags: { ...s.flags, follower: true } };
  const mine = s.kind === 'idle' ? s.waiting : s.attempt.input;
  const { key, expiresAt } = p.attempt;
  const effects: Effect[] = [];
  if (s.flags.follower && mine && !sameInput(mine, p.attempt.input)) effects.push({ type: 'Settle', result: openError(key) });
  else if (p.kind === 'settled') effects.push({ type: 'Settle', result: { ok: p.outcome } });
  else if (p.kind === 'rejected') effects.push({ type: 'Settle', result: rejectedResult(key, p.error) });
  else if (p.kind === 'unknown') effects.push({ type: 'Settle', result: { error: { type: 'unknown', key, expiresAt } } });
  return { state: st, effects };
}
