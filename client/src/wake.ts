// The page events that pause and wake an attempt: offline and online,
// visibilitychange, and pageshow from the back/forward cache. The charger
// loads this file with import() when it is created where there are events
// to hear (a page); a server never loads it.
import type { MachineEvent } from './machine-types.js';
import type { ChargerEnvironment } from './page.js';

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
