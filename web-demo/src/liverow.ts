// The timeline's row for the live status of an attempt. The charger follows
// a PROCESSING attempt (waiting for the shopper to authenticate, too) over a
// websocket (chargeUpdated) itself, so the row is drawn from what the
// charger says: its state (following over 'ws', open or not) and its events
// (live-open, live-failed, the chargeStatus answers).
import type { ChargerEvent, ChargerState } from '@chargeonce/client';
import type { ChargerObserver } from './checkout';
import type { RequestRecord } from './timeline';

/** The operation name the timeline gives the live status (the library's own). */
export const liveOperation = 'chargeUpdated';

export interface LiveRowHooks {
  sent(r: Omit<RequestRecord, 'n'>): RequestRecord;
  update(r: RequestRecord): void;
}

/** Followed over a stream (not paused, which closes it). Another tab's attempt is followed there, not here. */
const followsLive = (s: ChargerState): boolean => s.kind === 'following' && !s.paused && !s.flags.follower && s.live !== 'poll';

/** An observer of the charger that keeps the live status row of the timeline. */
export function liveRows(hooks: LiveRowHooks): ChargerObserver {
  let row: RequestRecord | null = null;
  let failure: string | null = null;
  /** The last answer was chargeStatus's: a final state then came by it, not by the stream. */
  let byStatus = false;
  const put = (r: RequestRecord) => {
    row = r;
    hooks.update(r);
  };
  return {
    event(e: ChargerEvent) {
      if (e.type === 'answer') byStatus = e.operation === 'chargeStatus';
      if (e.type === 'live-open') byStatus = false;
      if (e.type === 'live-failed') failure = e.reason;
    },
    state(next: ChargerState, prev: ChargerState) {
      const key = (s: ChargerState) => (s.kind === 'idle' ? undefined : s.attempt.key);
      const was = followsLive(prev) && key(prev) === key(next);
      if (next.kind === 'following' && followsLive(next) && !was) {
        failure = null;
        row = hooks.sent({ operation: liveOperation, idempotencyKey: next.attempt.key, sentAt: new Date().toISOString(), outcome: 'pending' });
        return;
      }
      if (!row) return;
      if (next.kind === 'following' && followsLive(next)) {
        if (next.liveOpen && row.detail !== 'subscribed') put({ ...row, status: 'PROCESSING', detail: 'subscribed' });
        return;
      }
      // The subscription ended: how?
      const o = next.kind === 'settled' ? next.outcome : undefined;
      if (o && !byStatus) {
        put({ ...row, outcome: 'answered', status: o.status, replayed: o.replayed, detail: 'subscribed' });
      } else if (next.kind === 'following' && !next.paused) {
        put({ ...row, outcome: 'unavailable', detail: failure ?? 'no answer in time' });
      } else {
        put({ ...row, outcome: 'closed', ...(o ? { status: o.status } : {}) });
      }
      row = null;
    },
  };
}
