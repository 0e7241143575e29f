// Following a PROCESSING attempt live, for the runner: the stream's
// transport is loaded with import() when it first opens (most checkouts
// never see PROCESSING, so neither sse.ts nor ws.ts is in the core), and
// what it hears becomes the machine's events.
import type { ChargerEvent } from './events.js';
import type { MachineEvent } from './machine-types.js';
import type { LiveHandlers, LiveOptions } from './stream.js';
import { describe } from './transport.js';

/** What a stream needs of the charger. */
export interface Follower {
  /** Whether this stream is still the charger's own: false once it was stopped, or the charger closed. */
  current(): boolean;
  /** The stream failed by itself: the charger forgets it. */
  ended(): void;
  emit(e: ChargerEvent): void;
  dispatch(e: MachineEvent): void;
  now(): number;
}

/** Opens the attempt's stream; returns what stops it. A stop before its transport loaded opens nothing. */
export function openLive(key: string, mode: 'sse' | 'ws', o: LiveOptions, f: Follower): () => void {
  let opened = false;
  let stop: (() => void) | undefined;
  let stopped = false;
  const h: LiveHandlers = {
    next(payload) {
      if (!f.current()) return;
      if (!opened) f.emit({ type: 'live-open', key, mode });
      opened = true;
      f.dispatch({ type: 'LiveNext', payload, now: f.now() });
    },
    failed(reason) {
      if (!f.current()) return;
      f.ended();
      f.emit({ type: 'live-failed', key, mode, reason });
      f.dispatch({ type: 'LiveFailed', reason, now: f.now() });
    },
  };
  (mode === 'ws' ? import('./ws.js') : import('./sse.js')).then(
    (m) => {
      if (!stopped) stop = m.open(o, h);
    },
    (err: unknown) => {
      if (!stopped) h.failed(describe(err));
    },
  );
  return () => {
    stopped = true;
    stop?.();
  };
}
