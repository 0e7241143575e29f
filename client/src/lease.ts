// The cross-tab fallback for browsers without the Web Locks API or
// BroadcastChannel: a lease in localStorage that its holder renews, which
// lapses when its tab is gone, and news carried by the storage event.
// crosstab.ts loads this file only when it is needed.
import type { Lock, TabMessage } from './crosstab-types.js';
import type { KeyValueStorage } from './types.js';

/** A lease in shared storage: { owner, until }, renewed by its holder every third of leaseMs. */
export function lease(name: string, tab: string, shared: KeyValueStorage, now: () => number, leaseMs: number): Lock {
  const slot = `${name}:lease`;
  let beat: ReturnType<typeof setInterval> | undefined;
  let poll: ReturnType<typeof setInterval> | undefined;
  const owner = (): string | undefined => {
    try {
      const l = JSON.parse(shared.getItem(slot) ?? 'null') as { owner: string; until: number } | null;
      return l && (l.owner === tab || l.until > now()) ? l.owner : undefined;
    } catch {
      return undefined;
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
    if ((owner() ?? tab) !== tab) return false;
    write();
    if ((owner() ?? tab) !== tab) return false;
    beat ??= setInterval(write, Math.max(250, leaseMs / 3));
    return true;
  };
  return {
    kind: 'lease',
    tryAcquire: async () => take(),
    waitFor(granted) {
      if (poll || beat) return;
      poll = setInterval(() => {
        if (!take()) return;
        clearInterval(poll);
        poll = undefined;
        granted();
      }, Math.max(250, leaseMs / 2));
    },
    release() {
      clearInterval(poll);
      poll = undefined;
      if (!beat) return;
      clearInterval(beat);
      beat = undefined;
      try {
        if (owner() === tab) shared.removeItem(slot);
      } catch {
        // it lapses by itself
      }
    },
  };
}

/** Messages through shared storage: each post writes the slot, and the other tabs hear a storage event. */
export function storageChannel(
  name: string,
  tab: string,
  shared: KeyValueStorage,
  listen: (type: string, fn: (e: Event) => void) => () => void,
  hear: (m: unknown) => void,
): { post(m: TabMessage): void; close(): void } {
  const slot = `${name}:msg`;
  let n = 0;
  const close = listen('storage', (ev) => {
    const e = ev as StorageEvent;
    try {
      if (e.key === slot && e.newValue) hear((JSON.parse(e.newValue) as { m: unknown }).m);
    } catch {
      // not ours
    }
  });
  return {
    // A full storage only loses the news, never the attempt: the caller catches.
    post: (m) => shared.setItem(slot, JSON.stringify({ n: `${tab}:${++n}`, m })),
    close,
  };
}
