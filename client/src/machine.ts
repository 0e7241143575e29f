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
import type { MachineConfig, MachineEvent, Step } from './machine-types.js';
import { leader, pay, remote, resume } from './starting.js';
import { flags, followed, progressOf, reply, same } from './steps.js';
import type { ChargerState } from './types.js';

export const machineDefaults: Readonly<MachineConfig> = {
  retry: retryDefaults,
  live: 'sse',
  liveConnectMs: 3_000,
  liveRecheckMs: 15_000,
  pollMs: 1_000,
  maxPollMs: 15_000,
};

export const initialState: ChargerState = { kind: 'idle' };

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

