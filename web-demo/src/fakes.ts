// What the unit tests share: a storage in memory, and the clock of the
// test's (fake) timers, as the page's modules take them.
import type { KeyValueStorage } from '@chargeonce/client';
import type { Clock } from './slow';

export class MemoryStorage implements KeyValueStorage {
  readonly items = new Map<string, string>();
  getItem = (k: string) => this.items.get(k) ?? null;
  setItem = (k: string, v: string) => void this.items.set(k, v);
  removeItem = (k: string) => void this.items.delete(k);
}

/** The global timers, which vi.useFakeTimers() replaces. */
export const timersClock: Clock = { now: () => Date.now(), setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as number) };
