// The transitions that start an attempt or take one up: pay(), resume()
// (with the key the return from the bank carries, when storage lost the
// attempt), this tab getting the sender lock, and another tab's progress.
import { expired, sameInput, type AttemptRecord } from './record.js';
import type { MachineConfig, MachineEvent, Progress, Step, Effect } from './machine-types.js';
import { ask, flags, openError, reply, rejectedResult, resend, same } from './steps.js';
import type { ChargerState } from './types.js';

const idle: ChargerState = { kind: 'idle' };

export function pay(s: ChargerState, e: Extract<MachineEvent, { type: 'Pay' }>, c: MachineConfig): Step {
  switch (s.kind) {
    case 'sending':
    case 'retrying':
    case 'paused':
    case 'processing':
    case 'action':
      // Open in this tab (or followed from another): the same input waits for it, another is refused
      // (and so is any input for a key adopted without one).
      return sameInput(s.input, e.input) ? same(s) : reply(s, openError(s.key));
    case 'unknown':
      if (!sameInput(s.input, e.input)) return reply(s, openError(s.key));
      return e.leader ? restart(s, e.now, c) : same({ ...s, remote: true });
    case 'settled':
    case 'rejected':
      if (!sameInput(s.input, e.input)) {
        return reply(s, { error: { type: 'state', state: s.kind, message: `attempt ${s.key} is ${s.kind}: reset() first` } });
      }
      return reply(s, s.kind === 'settled' ? { ok: s.outcome! } : rejectedResult(s));
  }
  // idle: what storage holds, then a new attempt.
  const r = e.record;
  if (r?.status === 'open') {
    if (!sameInput(r.input, e.input)) return reply(s, openError(r.key));
    const adopted = flags(s, { kind: 'unknown', key: r.key, input: r.input, expiresAt: r.expiresAt, nextAction: r.nextAction, attempt: 0 });
    return e.leader ? restart(adopted, e.now, c, r) : same({ ...adopted, kind: 'sending', remote: true });
  }
  if (r?.status === 'settled' && r.outcome?.status === 'SUCCEEDED' && sameInput(r.input, e.input)) {
    const st = flags(s, { kind: 'settled', key: r.key, input: r.input, outcome: r.outcome, expiresAt: r.expiresAt });
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

export function resume(s: ChargerState, e: Extract<MachineEvent, { type: 'Resume' }>, c: MachineConfig): Step {
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
  if (!r) {
    // Storage lost the attempt (another browser profile, storage cleared, a private window), but the
    // return from the bank names its key: follow it by asking only, with no input, so never chargeCard.
    return e.returnKey ? ask(flags(s, { kind: 'idle', key: e.returnKey }), e.now, c) : reply(s, { ok: null });
  }
  const known = { key: r.key, input: r.input, expiresAt: r.expiresAt, nextAction: r.nextAction };
  if (r.status === 'settled') return reply(flags(s, { kind: 'settled', ...known, outcome: r.outcome! }), { ok: r.outcome! });
  const adopted = flags(s, { kind: 'unknown', ...known, attempt: 0 });
  return e.leader ? restart(adopted, e.now, c, r) : same({ ...adopted, kind: 'sending', remote: true });
}

/**
 * Runs an open attempt again with its own key and input: chargeCard once
 * more (the server replays its result, or answers PROCESSING, reading the
 * provider if the shopper was authenticating), or, once the server may
 * have forgotten the key (expiresAt passed), only chargeStatus, since
 * chargeCard would then start a new attempt. A key adopted without its
 * input is only ever asked about.
 */
function restart(s: ChargerState, now: number, c: MachineConfig, rec?: AttemptRecord): Step {
  const mine: ChargerState = { ...s, remote: false };
  const effects: Effect[] = [];
  if (rec) effects.push({ type: 'Persist', record: rec }); // it may come from another tab's storage: keep it here too
  if (!s.input || expired(s, now)) return ask(mine, now, c, ...effects);
  return resend(mine, now, ...effects);
}

export function leader(s: ChargerState, e: Extract<MachineEvent, { type: 'Leader' }>, c: MachineConfig): Step {
  if (!s.remote || s.kind === 'settled' || s.kind === 'rejected' || s.kind === 'idle') return same(s);
  if (s.key) {
    // Take over the other tab's attempt by asking first: its final word may still be on its way here.
    const effects: Effect[] = e.record?.key === s.key ? [{ type: 'Persist', record: e.record }] : [];
    return ask(s, e.now, c, ...effects);
  }
  // We never heard which key the other tab used: storage may know; else this tab starts the attempt.
  return pay(flags(s, idle), { type: 'Pay', input: s.input!, key: e.key, record: e.record, leader: true, now: e.now }, c);
}

export function remote(s: ChargerState, p: Progress): Step {
  // This tab's own attempt is its own business; a tab that is idle, or waits on another, shows the other's.
  if (!s.remote && s.kind !== 'idle') return same(s);
  if (!p.key || !p.input) return same(s);
  if (p.kind === 'idle') return same(s);
  // An idle tab takes up another's attempt only while it is open: a final
  // one is over, and taking it would refuse this tab's next pay() until a
  // reset(), even a pay() made right after its own reset(), when the word
  // of the attempt it reset arrives late. A pay() of the same input still
  // finds the outcome in storage.
  if (s.kind === 'idle' && (p.kind === 'settled' || p.kind === 'rejected')) return same(s);
  const st: ChargerState = flags(s, { kind: p.kind, key: p.key, input: p.input, remote: true });
  if (p.outcome) st.outcome = p.outcome;
  if (p.error) st.error = p.error;
  if (p.expiresAt) st.expiresAt = p.expiresAt;
  if (p.nextAction) st.nextAction = p.nextAction;
  const effects: Effect[] = [];
  if (s.remote && s.input && !sameInput(s.input, p.input)) effects.push({ type: 'Settle', result: openError(p.key) });
  else if (p.kind === 'settled' && p.outcome) effects.push({ type: 'Settle', result: { ok: p.outcome } });
  else if (p.kind === 'rejected' && p.error) effects.push({ type: 'Settle', result: rejectedResult(st) });
  else if (p.kind === 'unknown') effects.push({ type: 'Settle', result: { error: { type: 'unknown', key: p.key, expiresAt: p.expiresAt } } });
  return { state: st, effects };
}

