// The page around the charger: globalThis's window, navigator and document
// as far as they exist (tests pass fakes), and the events that wake a
// waiting attempt (wake.ts, loaded apart). The other tabs are crosstab.ts's.
import type { CrossTabEnv } from './crosstab-types.js';

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
  /** Takes the page to url (handleNextAction()): location.assign by default. */
  navigate?: (url: string) => void;
  /** The page's address, for the return from the bank's chargeonce_key: globalThis.location by default. */
  location?: { search: string };
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
