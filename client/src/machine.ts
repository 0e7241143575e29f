// The charger as a pure function: step(state, event) → { state, effects }.
// Time, randomness (the jitter, a freshly minted key), what storage holds
// and whether this tab holds the scope's sender lock all come in with the
// event, so every transition is deterministic and tested as a table. The
// runner (charger.ts) performs the effects. The events and effects are
// declared in machine-types.ts; the transitions live in starting.ts (pay,
// resume, another tab's progress) and following.ts (answers, PROCESSING,
// authentication, offline and hidden). The machine is internal: the
// package exports the charger, not step().
//
//   idle ──Pay──▶ sending ──SUCCEEDED/FAILED──▶ settled ──Reset──▶ idle
//                  │ ▲  ├──PROCESSING──▶ following ──live / chargeStatus──▶ settled
//                  │ │  │     (with a nextAction while the shopper authenticates:
//                  │ │  │      HandleNextAction to the bank; the return resumes the same key)
//                  │ │  └──an error that is an answer──▶ rejected ──Reset──▶ idle
//                  ▼ │
//               retrying ──budget spent──▶ unknown ──Pay (same input) / Resume──▶ sending (same key)
//   retrying or following, offline (or hidden while retrying or polling): paused,
//     a flag, not a kind ──Online / Visible──▶ the same key at once
//   idle ──Resume, no record, the return's key──▶ following: chargeStatus only, never chargeCard
//   flags.follower: another tab leads the attempt; this one shows its state and sends nothing
import { retryDefaults } from './backoff.js';
import { answered, hidden, liveFailed, liveNext, offline, statusAnswered, timerFired, toNextAction, wake } from './following.js';
import type { MachineConfig, MachineEvent, Step } from './machine-types.js';
import { leader, pay, remote, resume } from './starting.js';
import { idle, reply, same, withFlags } from './steps.js';
import type { AttemptState, ChargerState } from './types.js';

export const machineDefaults: Readonly<MachineConfig> = {
  retry: retryDefaults,
  live: 'sse',
  liveConnectMs: 3_000,
  liveRecheckMs: 15_000,
  pollMs: 1_000,
  maxPollMs: 15_000,
};

export const initialState: ChargerState = { kind: 'idle', flags: { offline: false, hidden: false, follower: false }, paused: false };

/** The one transition function. It never throws and never reads a clock. */
export function step(s: ChargerState, e: MachineEvent, c: MachineConfig = machineDefaults): Step {
  const out = transition(s, e, c);
  const st = out.state;
  // Other tabs hear of every change this tab makes to its attempt: its state, as it is here.
  if (st.kind !== 'idle' && !st.flags.follower && visibleChange(s, st)) out.effects.push({ type: 'Broadcast', progress: st });
  return out;
}

function transition(s: ChargerState, e: MachineEvent, c: MachineConfig): Step {
  switch (e.type) {
    case 'Pay':
      return pay(s, e, c);
    case 'Resume':
      return resume(s, e, c);
    case 'Reset':
      if (s.kind === 'settled' || s.kind === 'rejected' || (s.kind === 'idle' && !s.waiting)) {
        return { state: idle(s), effects: s.flags.follower || s.kind === 'idle' ? [] : [{ type: 'Forget' }] };
      }
      return reply(s, {
        error: {
          type: 'state',
          state: s.kind,
          // A new key now could charge twice.
          message: s.kind === 'idle' ? "another tab's attempt is open: resume() follows it" : `attempt ${s.attempt.key} is ${s.kind}: resume() it`,
        },
      });
    case 'Abort':
      return { state: s, effects: s.kind === 'idle' ? [] : [{ type: 'Emit', event: { type: 'abort', key: s.attempt.key } }] };
    case 'Offline':
      return offline(s);
    case 'Hidden':
      return hidden(s);
    case 'Online':
      return wake(withFlags(s, { offline: false }), e.now, c);
    case 'Visible':
      return wake(withFlags(s, { hidden: false }), e.now, c);
    case 'RemoteProgress':
      return remote(s, e.progress);
    case 'Leader':
      return leader(s, e, c);
    case 'HandleNextAction':
      return toNextAction(s, e.record);
  }
  if (s.flags.follower) return same(s); // another tab sends; this one only listens
  switch (e.type) {
    case 'Answered':
      return s.kind === 'sending' ? answered(s, e.answer, e.now, e.jitter, c) : same(s);
    case 'StatusAnswered':
      return s.kind === 'following' ? statusAnswered(s, e.answer, e.now, c) : same(s);
    case 'LiveNext':
      return liveNext(s, e.payload, c);
    case 'LiveFailed':
      return liveFailed(s, e.reason);
    case 'TimerFired':
      return timerFired(s, e.now);
  }
}

/** What the other tabs show of an attempt changed: its kind, key, outcome, expiresAt, nextAction, pause, or who leads it. */
function visibleChange(a: ChargerState, b: AttemptState): boolean {
  if (a.kind !== b.kind || a.paused !== b.paused || a.flags.follower !== b.flags.follower) return true;
  return (
    a.attempt.key !== b.attempt.key ||
    a.attempt.expiresAt !== b.attempt.expiresAt ||
    a.attempt.nextAction !== b.attempt.nextAction ||
    (a.kind === 'settled' && b.kind === 'settled' && a.outcome !== b.outcome)
  );
}
