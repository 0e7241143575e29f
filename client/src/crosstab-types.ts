// The shapes of cross-tab coordination: the sender lock, the tabs'
// messages, what the charger and the page give it and get from it. Types
// only: the charger (charger.ts) and the page (page.ts) import them from
// here, while the code itself (crosstab.ts) loads later with import().
import type { ChargerEvent } from './events.js';
import type { MachineEvent, Progress } from './machine-types.js';
import type { AttemptRecord } from './record.js';
import type { ChargerState } from './types.js';

export type TabMessage = { from: string; kind: 'progress'; progress: Progress } | { from: string; kind: 'query' };

export interface CrossTab {
  readonly locks: 'web-locks' | 'none';
  readonly channel: 'broadcast-channel' | 'none';
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
  now: () => number;
}

export interface Lock {
  kind: CrossTab['locks'];
  tryAcquire(): Promise<boolean>;
  waitFor(granted: () => void): void;
  release(): void;
}

/** What the other tabs need of the charger that joins them. */
export interface Member {
  id: string;
  state(): ChargerState;
  /** What storage holds for the scope now. */
  record(): AttemptRecord | null;
  emit(e: ChargerEvent): void;
  /** Dispatches e, remade with a freshly minted key if step starts a new attempt. */
  dispatch(e: MachineEvent, remake?: (key: string) => MachineEvent): void;
}

/** The charger's side of the scope's tabs. */
export interface Joined {
  /** Takes the sender lock when this call may have to send. */
  lead(s: ChargerState): Promise<boolean>;
  /** After each step: holds the lock exactly while this tab sends; queues for it while this tab waits on another. */
  sync(s: ChargerState, waiting: boolean): void;
  /** Tells the other tabs of this tab's progress. */
  tell(p: Progress): void;
  close(): void;
}
