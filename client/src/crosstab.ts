// One sender per scope across the origin's tabs, and word of its progress
// to the others, so that they show it instead of paying. The Web Locks API
// where it exists (a lock dies with its tab), progress over
// BroadcastChannel. Without them, lease.ts (a lease in localStorage, the
// storage event) is loaded on first use: current browsers never need it.
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

export interface Lock {
  kind: CrossTab['locks'];
  tryAcquire(): Promise<boolean>;
  waitFor(granted: () => void): void;
  release(): void;
}

export const leaseMsDefault = 6_000;

export function createCrossTab(name: string, tab: string, env: CrossTabEnv, onMessage: (m: TabMessage) => void): CrossTab {
  const { shared, addEventListener: add } = env;
  const hear = (m: unknown) => {
    const t = m as TabMessage | null;
    if (t && typeof t === 'object' && t.from !== tab && (t.kind === 'progress' || t.kind === 'query')) onMessage(t);
  };
  const fallback = shared && (!env.locks || (!env.BroadcastChannel && add)) ? import('./lease.js') : null;
  // Calls on the fallback wait for it to load, in the order they were made.
  const later = <T>(fn: (m: typeof import('./lease.js')) => T) => fallback!.then(fn);

  let lock: Lock = { kind: 'none', tryAcquire: async () => true, waitFor: () => {}, release: () => {} };
  if (env.locks) lock = webLock(name, env.locks);
  else if (shared) {
    const l = later((m) => m.lease(name, tab, shared, env.now, env.leaseMs ?? leaseMsDefault));
    lock = {
      kind: 'lease',
      tryAcquire: () => l.then((x) => x.tryAcquire()),
      waitFor: (granted) => void l.then((x) => x.waitFor(granted)),
      release: () => void l.then((x) => x.release()),
    };
  }

  let channel: CrossTab['channel'] = 'none';
  let post: (m: TabMessage) => void = () => {};
  let closeChannel = () => {};
  if (env.BroadcastChannel) {
    const bc = new env.BroadcastChannel(name);
    bc.onmessage = (e) => hear(e.data);
    post = (m) => bc.postMessage(m);
    closeChannel = () => bc.close();
    channel = 'broadcast-channel';
  } else if (shared && add) {
    const listen = (type: string, fn: (e: Event) => void) => {
      add(type, fn);
      return () => env.removeEventListener?.(type, fn);
    };
    const c = later((m) => m.storageChannel(name, tab, shared, listen, hear));
    post = (m) => void c.then((x) => x.post(m)).catch(() => {});
    closeChannel = () => void c.then((x) => x.close());
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
