// The order of a checkout that only authorized (captureMethod MANUAL): the
// card holds the money until the shop ships the order, which captures it
// (Ship order), or cancels it, which voids the authorization (Cancel
// order). Both go through the shop's backend (/demo/capture, /demo/void),
// which calls captureCharge or voidCharge with the merchant's secret key,
// on the server: each is an act of the desk (desk.ts), run by the library's
// runner, one id per click, kept before the first byte and sent again with
// every retry, so a lost answer cannot capture twice. A capture and a void of one charge race to
// one winner at chargeonce; the page also never offers both at once.
//
//   authorized ──Ship order──▶ capture (captureId) ──▶ CAPTURED
//   authorized ──Cancel order──▶ void (voidId) ──▶ VOIDED
import type { Charge } from '@chargeonce/client';
// A capture and a void, as the backend answers them (captureCharge's and voidCharge's payloads): the library's types.
import type { Capture, Void } from '@chargeonce/client/server';
import { captureAct, voidAct } from './backend';
import { shownOf, type CheckoutState } from './checkout-state';
import { actBusy, actOperation, canAct, Desk, type ActPhase, type ActState, type ActTarget, type DeskOptions, type SettledAct } from './desk';

export type { Capture, Void };

/** What Ship order made: the capture, and the charge as it is now (null when the backend could not read it). */
export interface Shipped {
  capture: Capture;
  charge: Charge | null;
}

/** What Cancel order made: the void, and the charge as it is now. */
export interface Cancelled {
  void: Void;
  charge: Charge | null;
}

const chargeIn = (p: Record<string, unknown>) => (p.charge as Charge | null | undefined) ?? null;

/** Ship order: the capture of all that the authorization holds, under the record's key as its capture id, sent through base. */
export const captureOperation = (base: typeof fetch = fetch) =>
  actOperation<Shipped>(captureAct, (p) => (p.capture ? { capture: p.capture as Capture, charge: chargeIn(p) } : null), base);

/** Cancel order: the void of the authorization, under the record's key as its void id, sent through base. */
export const voidOperation = (base: typeof fetch = fetch) =>
  actOperation<Cancelled>(voidAct, (p) => (p.void ? { void: p.void as Void, charge: chargeIn(p) } : null), base);

/** The authorization a checkout made: its charge as the checkout's outcome had it. */
export interface OrderTarget extends ActTarget {
  charge: Charge;
}

/**
 * The order to ship or cancel: the charge of a checkout that SUCCEEDED
 * without taking the money (captureMethod MANUAL); null for any other
 * state, and for a charge captured at once.
 */
export function orderTarget(s: CheckoutState): OrderTarget | null {
  const shown = shownOf(s);
  if (shown.kind !== 'final' || shown.c.outcome.status !== 'SUCCEEDED') return null;
  const c = shown.c.outcome.charge;
  if (c.captureStatus === 'CAPTURED') return null;
  return { chargeId: c.id, amount: c.amount, currency: c.currency, charge: c };
}

export interface OrderState {
  target: OrderTarget | null;
  ship: ActPhase<Shipped>;
  cancel: ActPhase<Cancelled>;
  /** The act the page heard of last: its note is the one shown. */
  last: 'ship' | 'cancel';
}

/** A capture that failed leaves the authorization as it was: Ship order may try again, under a new id. A void likewise. */
const again = (p: SettledAct<unknown>) => p.kind === 'failed';

/**
 * The order's charge as the newest word has it: what Ship order or
 * Cancel order answered (they never both succeed), else the checkout's
 * outcome; null without an order.
 */
export function orderCharge(s: OrderState): Charge | null {
  if (!s.target) return null;
  if (s.cancel.kind === 'succeeded' && s.cancel.made.charge) return s.cancel.made.charge;
  if (s.ship.kind === 'succeeded' && s.ship.made.charge) return s.ship.made.charge;
  return s.target.charge;
}

/** Whether the authorization is still open: something is left to capture, or to release. */
export function orderOpen(s: OrderState): boolean {
  const c = orderCharge(s);
  return !!c && (c.captureStatus === 'UNCAPTURED' || c.captureStatus === 'PARTIALLY_CAPTURED');
}

/** Whether Ship order may be pressed: the authorization is open, no cancel is on its way or made, and the capture may go. */
export function canShip(s: OrderState): boolean {
  if (!orderOpen(s) || actBusy(s.cancel) || s.cancel.kind === 'succeeded') return false;
  return canAct({ target: s.target, phase: s.ship }, again);
}

/** Whether Cancel order may be pressed: the authorization is open and nothing captured, no capture is on its way or made, and the void may go. */
export function canCancel(s: OrderState): boolean {
  if (!orderOpen(s) || orderCharge(s)!.amountCaptured > 0 || actBusy(s.ship) || s.ship.kind === 'succeeded') return false;
  return canAct({ target: s.target, phase: s.cancel }, again);
}

/** The records' names of a charge's capture and void, before the charge's id, in the store. */
export const captureName = 'capture';
export const voidName = 'void';

export interface OrderOptions extends Omit<DeskOptions<never>, 'name' | 'op' | 'again'> {
  /** The shop's backend's fetch. */
  fetch?: typeof fetch;
}

export type OrderListener = (next: OrderState, prev: OrderState) => void;

/** The order of the page's authorization: one desk that ships, one that cancels. */
export class Order {
  private readonly ships: Desk<Shipped, OrderTarget>;
  private readonly cancels: Desk<Cancelled, OrderTarget>;
  private readonly listeners = new Set<OrderListener>();
  private current: OrderState;
  private pressed: OrderState['last'] | null = null;
  private quiet = false;

  constructor(o: OrderOptions) {
    const { fetch: base, ...rest } = o;
    this.ships = new Desk<Shipped, OrderTarget>({ ...rest, name: captureName, op: captureOperation(base), again });
    this.cancels = new Desk<Cancelled, OrderTarget>({ ...rest, name: voidName, op: voidOperation(base), again });
    this.current = this.compose();
    this.ships.subscribe(() => this.changed());
    this.cancels.subscribe(() => this.changed());
  }

  get state(): OrderState {
    return this.current;
  }

  subscribe(fn: OrderListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The order the page shows, or null: as Desk.show, for both acts. */
  show(target: OrderTarget | null): void {
    if (target?.chargeId !== this.current.target?.chargeId) this.pressed = null;
    // One change for both desks: neither is shown with the other's old order.
    this.quiet = true;
    try {
      this.ships.show(target);
      this.cancels.show(target);
    } finally {
      this.quiet = false;
    }
    this.changed();
  }

  /** Ship order: captures all that the authorization holds, under a new capture id (or the unknown one's). */
  ship(): boolean {
    if (!canShip(this.current)) return false;
    this.pressed = 'ship';
    return this.ships.act();
  }

  /** Cancel order: voids the authorization, under a new void id (or the unknown one's). */
  cancel(): boolean {
    if (!canCancel(this.current)) return false;
    this.pressed = 'cancel';
    return this.cancels.act();
  }

  private compose(): OrderState {
    const ship = this.ships.state.phase;
    const cancel = this.cancels.state.phase;
    // After a reload nothing was pressed here: the act that was made, else the one that went at all.
    const last = this.pressed ?? (cancel.kind === 'succeeded' || (cancel.kind !== 'none' && ship.kind !== 'succeeded') ? 'cancel' : 'ship');
    return { target: this.ships.state.target, ship, cancel, last };
  }

  private changed(): void {
    if (this.quiet) return;
    const prev = this.current;
    const next = this.compose();
    if (next.target === prev.target && next.ship === prev.ship && next.cancel === prev.cancel && next.last === prev.last) return;
    this.current = next;
    for (const fn of this.listeners) fn(next, prev);
  }
}

/** The phase of s's act that the page shows. */
export const shownAct = (s: OrderState): ActState<Shipped | Cancelled> & { act: 'ship' | 'cancel' } =>
  s.last === 'cancel' ? { act: 'cancel', target: s.target, phase: s.cancel } : { act: 'ship', target: s.target, phase: s.ship };
