// What the unit tests share: a storage in memory, the clock of the test's
// (fake) timers, as the page's modules take them, and the checkout's states
// of a charger that settled or is on its way.
import type { Charge, ChargerFlags, ChargerState, KeyValueStorage, Outcome } from '@chargeonce/client';
import { pageState, type CheckoutState, type PageState } from './checkout-state';
import type { Clock } from './slow';

export class MemoryStorage implements KeyValueStorage {
  readonly items = new Map<string, string>();
  getItem = (k: string) => this.items.get(k) ?? null;
  setItem = (k: string, v: string) => void this.items.set(k, v);
  removeItem = (k: string) => void this.items.delete(k);
}

/** The global timers, which vi.useFakeTimers() replaces. */
export const timersClock: Clock = { now: () => Date.now(), setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as number) };

const flags: ChargerFlags = { offline: false, hidden: false, follower: false };

/** The checkout showing the charger's state c, with the page's own beside it. */
export const checkoutOf = (c: ChargerState, page: Partial<PageState> = {}): CheckoutState => ({ charger: c, page: pageState(page) });

/** The checkout of an attempt (key k1) that settled with outcome; its input is the card's. */
export const settledWith = (outcome: Outcome): CheckoutState =>
  checkoutOf({ kind: 'settled', attempt: { key: outcome.key, input: { paymentMethod: 'pm_card_visa' }, sends: 1 }, outcome, flags, paused: false });

/** The checkout of an attempt (key k1) that SUCCEEDED with charge. */
export const paidWith = (charge: Charge): CheckoutState => settledWith({ status: 'SUCCEEDED', key: 'k1', charge, replayed: false });

/** The checkout of an attempt (key k1) whose chargeCard is on its way. */
export const sendingState = (): CheckoutState =>
  checkoutOf({ kind: 'sending', attempt: { key: 'k1', input: { paymentMethod: 'pm_card_visa' }, sends: 1 }, run: { since: 0, tries: 1 }, flags, paused: false });
