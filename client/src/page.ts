// The page around the charger: globalThis's window, navigator and document
// as far as they exist (tests pass fakes), the events that wake a waiting
// attempt, and the cross-tab lock held exactly while this tab sends.
import { createCrossTab, type CrossTab, type CrossTabEnv, type TabMessage } from './crosstab.js';
import type { MachineEvent } from './machine.js';
import type { ChargerState } from './types.js';

/** The parts of the browser the charger listens to; tests pass fakes. */
export interface ChargerEnvironment extends Partial<CrossTabEnv> {
  addEventListener?: (type: string, fn: (e: Event) => void) => void;
  removeEventListener?: (type: string, fn: (e: Event) => void) => void;
  /** navigator.onLine. */
  onLine?: () => boolean;
  /** document.visibilityState === 'visible'. */
  visible?: () => boolean;
  now?: () => number;
  random?: () => number;
  WebSocket?: typeof WebSocket;
}

/** globalThis's window, navigator and document, as far as they exist. */
export function browser(): ChargerEnvironment {
  const g = globalThis as unknown as {
    addEventListener?: unknown;
    navigator?: { onLine?: boolean; locks?: LockManager };
    document?: EventTarget & { visibilityState?: string };
    BroadcastChannel?: typeof BroadcastChannel;
    WebSocket?: typeof WebSocket;
  };
  const { navigator: n, document: d } = g;
  const env: ChargerEnvironment = { WebSocket: g.WebSocket };
  if (typeof g.addEventListener === 'function') {
    // visibilitychange fires on document, the others on window.
    const target = (t: string) => (t === 'visibilitychange' && d ? d : (g as unknown as EventTarget));
    env.addEventListener = (t, f) => target(t).addEventListener(t, f);
    env.removeEventListener = (t, f) => target(t).removeEventListener(t, f);
  }
  if (typeof n?.onLine === 'boolean') env.onLine = () => n.onLine !== false;
  if (d) {
    env.visible = () => d.visibilityState !== 'hidden';
    // Tabs exist only in a page: in Node (server to server) an open channel would keep the process alive.
    env.locks = n?.locks;
    env.BroadcastChannel = g.BroadcastChannel;
  }
  return env;
}

/** Feeds online, offline, visibilitychange and pageshow to dispatch; returns what stops listening. */
export function listen(env: ChargerEnvironment, now: () => number, dispatch: (e: MachineEvent) => void): () => void {
  const add = env.addEventListener;
  if (!add) return () => {};
  const seen = () => dispatch({ type: env.visible?.() === false ? 'Hidden' : 'Visible', now: now() });
  const on: Record<string, (e: Event) => void> = {
    online: () => dispatch({ type: 'Online', now: now() }),
    offline: () => dispatch({ type: 'Offline', now: now() }),
    visibilitychange: seen,
    // A back/forward-cache restore: timers may have slept; look again at once.
    pageshow: (e) => (e as PageTransitionEvent).persisted && dispatch({ type: 'Visible', now: now() }),
  };
  for (const t in on) add(t, on[t]!);
  if (env.onLine?.() === false) on.offline!(new Event('offline'));
  if (env.visible?.() === false) seen();
  return () => {
    for (const t in on) env.removeEventListener?.(t, on[t]!);
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
      if (holding || (!s.remote && s.kind !== 'idle' && s.kind !== 'unknown')) return true; // runs here already, or answered
      return (holding = await tab.tryAcquire());
    },
    sync(s, waiting, granted) {
      const active = s.kind === 'sending' || s.kind === 'retrying' || s.kind === 'paused' || s.kind === 'processing';
      if (active && !s.remote) return;
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
