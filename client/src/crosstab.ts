// One sender per scope across the origin's tabs, and word of its progress
// to the others, so that they show it instead of paying. The Web Locks API
// where it exists (a lock dies with its tab); else a lease in localStorage
// that its holder renews, which lapses when the tab is gone. Progress goes
// over BroadcastChannel, else through localStorage's storage event.
import type { Progress } from './machine.js';
import type { KeyValueStorage } from './types.js';

export type TabMessage = { from: string; kind: 'progress'; progress: Progress } | { from: string; kind: 'query' };

export interface CrossTab {
  readonly locks: 'web-locks' | 'lease' | 'none';
  readonly channel: 'broadcast-channel' | 'storage-event' | 'none';
  /** Takes the scope's sender lock if no other tab holds it. */
  tryAcquire(): Promise<boolean>;
  /** Queues for the lock: granted runs once this tab holds it. */
  waitFor(granted: () => void): void;
  release(): void;
  post(m: TabMessage): void;
  close(): void;
}

/** The parts of the browser cross-tab coordination uses; globalThis's by default, fakes in tests. */
export interface CrossTabEnv {
  locks?: LockManager | undefined;
  BroadcastChannel?: typeof BroadcastChannel | undefined;
  /** Shared storage for the lease and the storage-event channel (localStorage). */
  shared?: KeyValueStorage | null | undefined;
  addEventListener?: ((type: string, fn: (e: Event) => void) => void) | undefined;
  removeEventListener?: ((type: string, fn: (e: Event) => void) => void) | undefined;
  now: () => number;
  leaseMs?: number;
}

export const leaseMsDefault = 6_000;

export function createCrossTab(name: string, tab: string, env: CrossTabEnv, onMessage: (m: TabMessage) => void): CrossTab {
  const lock = env.locks ? webLock(name, env.locks) : env.shared ? lease(name, tab, env.shared, env.now, env.leaseMs ?? leaseMsDefault) : alone();
  let post: (m: TabMessage) => void = () => {};
  let closeChannel = () => {};
  let channel: CrossTab['channel'] = 'none';
  const hear = (m: unknown) => {
    const t = m as TabMessage | null;
    if (t && typeof t === 'object' && t.from !== tab && (t.kind === 'progress' || t.kind === 'query')) onMessage(t);
  };
  if (env.BroadcastChannel) {
    const bc = new env.BroadcastChannel(name);
    bc.onmessage = (e) => hear(e.data);
    post = (m) => bc.postMessage(m);
    closeChannel = () => bc.close();
    channel = 'broadcast-channel';
  } else if (env.shared && env.addEventListener) {
    const shared = env.shared;
    const slot = `${name}:msg`;
    let n = 0;
    const fn = (ev: Event) => {
      const e = ev as StorageEvent;
      if (e.key !== slot || !e.newValue) return;
      try {
        hear((JSON.parse(e.newValue) as { m: unknown }).m);
      } catch {
        // not ours
      }
    };
    env.addEventListener('storage', fn);
    post = (m) => {
      try {
        shared.setItem(slot, JSON.stringify({ n: `${tab}:${++n}`, m }));
      } catch {
        // a full storage only loses the news, never the attempt
      }
    };
    closeChannel = () => env.removeEventListener?.('storage', fn);
    channel = 'storage-event';
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
        // a closed channel: the other tabs poll nothing, and still see the server's answer
      }
    },
    close() {
      lock.release();
      closeChannel();
    },
  };
}

interface Lock {
  kind: CrossTab['locks'];
  tryAcquire(): Promise<boolean>;
  waitFor(granted: () => void): void;
  release(): void;
}

function webLock(name: string, locks: LockManager): Lock {
  let free: (() => void) | null = null;
  let waiting: AbortController | null = null;
  const hold = () => new Promise<void>((r) => (free = r));
  return {
    kind: 'web-locks',
    tryAcquire() {
      if (free) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        locks
          .request(name, { ifAvailable: true }, (l) => {
            if (!l) {
              resolve(false);
              return undefined;
            }
            resolve(true);
            return hold();
          })
          .catch(() => resolve(true)); // locks refused here: act alone, as without them
      });
    },
    waitFor(granted) {
      if (free || waiting) return;
      const ctl = new AbortController();
      waiting = ctl;
      locks
        .request(name, { signal: ctl.signal }, () => {
          waiting = null;
          granted();
          return hold();
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

/** A lease in shared storage: { owner, until }, renewed by its holder every third of leaseMs. */
function lease(name: string, tab: string, shared: KeyValueStorage, now: () => number, leaseMs: number): Lock {
  const slot = `${name}:lease`;
  let beat: ReturnType<typeof setInterval> | null = null;
  let poll: ReturnType<typeof setInterval> | null = null;
  const read = (): { owner: string; until: number } | null => {
    try {
      return JSON.parse(shared.getItem(slot) ?? 'null') as { owner: string; until: number } | null;
    } catch {
      return null;
    }
  };
  const write = () => {
    try {
      shared.setItem(slot, JSON.stringify({ owner: tab, until: now() + leaseMs }));
    } catch {
      // cannot write the lease: the read-back below decides
    }
  };
  const take = (): boolean => {
    const l = read();
    if (l && l.owner !== tab && l.until > now()) return false;
    write();
    const mine = read();
    if (mine && mine.owner !== tab) return false;
    if (!beat) beat = setInterval(write, Math.max(250, Math.floor(leaseMs / 3)));
    return true;
  };
  return {
    kind: 'lease',
    tryAcquire: () => Promise.resolve(take()),
    waitFor(granted) {
      if (poll || beat) return;
      poll = setInterval(() => {
        if (!take()) return;
        clearInterval(poll!);
        poll = null;
        granted();
      }, Math.max(250, Math.floor(leaseMs / 2)));
    },
    release() {
      if (poll) clearInterval(poll);
      poll = null;
      if (!beat) return;
      clearInterval(beat);
      beat = null;
      if (read()?.owner === tab) {
        try {
          shared.removeItem(slot);
        } catch {
          // it lapses by itself
        }
      }
    },
  };
}

/** No locks and no shared storage: this tab is the only sender it can know of. */
function alone(): Lock {
  return { kind: 'none', tryAcquire: () => Promise.resolve(true), waitFor: () => {}, release: () => {} };
}
