// One sender per scope across the origin's tabs, and word of its progress
// to the others, so that they show it instead of paying: the Web Locks API
// (a lock dies with its tab) and BroadcastChannel, both in every browser
// this package supports (Baseline since March 2022). Where either is
// missing (an old browser, or Web Locks outside a secure context), each
// tab sends on its own; the key in shared storage and the server's
// idempotency still hold (README.md, "One sender per scope across tabs").
// The charger loads this file itself with import() when it is created in a
// page, so that the core stays small; a server never loads it.
import type { CrossTab, CrossTabEnv, Joined, Lock, Member, TabMessage } from './crosstab-types.js';
import type { MachineEvent } from './machine-types.js';
import type { ChargerState } from './types.js';

export function createCrossTab(name: string, tab: string, env: CrossTabEnv, onMessage: (m: TabMessage) => void): CrossTab {
  const hear = (m: unknown) => {
    const t = m as TabMessage | null;
    if (!t || typeof t !== 'object' || t.from === tab) return;
    // A progress is a state with an attempt; anything else (another page's message) is not ours.
    if (t.kind === 'query' || (t.kind === 'progress' && typeof t.progress?.attempt?.key === 'string')) onMessage(t);
  };
  const lock: Lock = env.locks ? webLock(name, env.locks) : { kind: 'none', tryAcquire: async () => true, waitFor: () => {}, release: () => {} };

  let channel: CrossTab['channel'] = 'none';
  let post: (m: TabMessage) => void = () => {};
  let closeChannel = () => {};
  if (env.BroadcastChannel) {
    const bc = new env.BroadcastChannel(name);
    bc.onmessage = (e) => hear(e.data);
    post = (m) => bc.postMessage(m);
    closeChannel = () => bc.close();
    channel = 'broadcast-channel';
  }
  return {
    locks: lock.kind,
    channel,
    tryAcquire: lock.tryAcquire,
    waitFor: lock.waitFor,
    release: lock.release,
    post: (m) => {
      try {
        post(m);
      } catch {
        // a closed channel: the other tabs still see the server's answer
      }
    },
    close() {
      lock.release();
      closeChannel();
    },
  };
}

function webLock(name: string, locks: LockManager): Lock {
  let free: (() => void) | null = null;
  let waiting: AbortController | null = null;
  const hold = () => new Promise<void>((r) => (free = r));
  return {
    kind: 'web-locks',
    tryAcquire: () =>
      free
        ? Promise.resolve(true)
        : new Promise<boolean>((resolve) => {
            locks
              .request(name, { ifAvailable: true }, (l) => {
                resolve(!!l);
                return l ? hold() : undefined;
              })
              .catch(() => resolve(true)); // locks refused here: act alone, as without them
          }),
    waitFor(granted) {
      if (free || waiting) return;
      const ctl = new AbortController();
      waiting = ctl;
      locks
        .request(name, { signal: ctl.signal }, () => {
          waiting = null;
          // Held before granted() runs: it may release the lock at once (the attempt settled while this tab waited).
          const held = hold();
          granted();
          return held;
        })
        .catch(() => {
          if (waiting === ctl) waiting = null;
        });
    },
    release() {
      waiting?.abort();
      waiting = null;
      const f = free;
      free = null;
      f?.();
    },
  };
}

/** What the charger needs of the other tabs: the sender lock, and their news. */
export interface Tabs {
  readonly tab: CrossTab;
  /** Takes the lock when this call may have to send. */
  lead(s: ChargerState): Promise<boolean>;
  /** Holds the lock exactly while this tab sends; queues for it (granted) while this tab waits on another. */
  sync(s: ChargerState, waiting: boolean, granted: () => void): void;
  close(): void;
}

export function tabs(name: string, id: string, env: CrossTabEnv, hear: (m: TabMessage) => void): Tabs {
  const tab = createCrossTab(name, id, env, hear);
  let holding = false;
  return {
    tab,
    async lead(s) {
      if (holding || (!s.flags.follower && s.kind !== 'idle' && s.kind !== 'unknown')) return true; // runs here already, or answered
      return (holding = await tab.tryAcquire());
    },
    sync(s, waiting, granted) {
      const active = s.kind === 'sending' || s.kind === 'retrying' || s.kind === 'following' || (s.kind === 'idle' && s.waiting !== undefined);
      if (active && !s.flags.follower) return;
      if (holding) {
        holding = false;
        tab.release();
      }
      if (active && waiting) {
        tab.post({ from: id, kind: 'query' });
        tab.waitFor(() => {
          holding = true;
          granted();
        });
      }
    },
    close() {
      tab.close();
      holding = false;
    },
  };
}

/**
 * The charger's place among the scope's tabs: it answers their questions
 * with its own progress, follows theirs while it is idle or waits on
 * another tab, takes the attempt over when it gets the lock, and says once
 * which fallback is in use, if any.
 */
export function join(name: string, env: CrossTabEnv, m: Member): Joined {
  const t: Tabs = tabs(name, m.id, env, (msg) => {
    const s = m.state();
    if (msg.kind === 'query') {
      if (s.kind !== 'idle' && !s.flags.follower) t.tab.post({ from: m.id, kind: 'progress', progress: s });
      return;
    }
    if (s.flags.follower || s.kind === 'idle') m.emit({ type: 'remote', key: msg.progress.attempt.key, kind: msg.progress.kind });
    m.dispatch({ type: 'RemoteProgress', progress: msg.progress, now: env.now() });
  });
  const { locks, channel } = t.tab;
  if (locks !== 'web-locks' || channel !== 'broadcast-channel') m.emit({ type: 'crosstab', locks, channel });
  const leader = (key: string): MachineEvent => ({ type: 'Leader', key, record: m.record(), now: env.now() });
  return {
    lead: t.lead,
    sync: (s, waiting) => t.sync(s, waiting, () => m.dispatch(leader(''), leader)),
    tell: (progress) => t.tab.post({ from: m.id, kind: 'progress', progress }),
    close: t.close,
  };
}
