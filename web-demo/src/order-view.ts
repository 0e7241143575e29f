// What the order of an authorization shows and says (order.ts's state):
// Ship order and Cancel order, the note under them, the live region's
// sentence, the capture facts of the outcome, and what the ledger's
// summary says of the provider's captures and voids. Plain data, computed
// without a DOM, that render.ts paints. Unit-tested in order-view.test.ts.
import type { Charge } from '@chargeonce/client';
import { actAnnouncement, actNote, type ActNote, type ActWords, type ButtonView } from './act-view';
import { actBusy, actSettled } from './desk';
import type { Ledger } from './ledger';
import { canCancel, canShip, orderOpen, type Cancelled, type OrderState, type Shipped } from './order';
import { money } from './shop';

/** When the authorization lapses, as the shopper's clock shows it. */
export const expiryText = (iso: string) =>
  new Date(iso).toLocaleString('en-US', { month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit' });

const shipWords: ActWords<Shipped> = {
  noun: 'capture',
  button: 'Ship order',
  idName: 'capture id',
  doing: 'Capturing',
  done: 'captured',
  offer: (amount) =>
    `Ship order captures the ${amount} the card holds, and Cancel order voids the authorization, through the shop's backend, which holds the secret key. One id per click, and every retry of it sends the same id, so a lost answer cannot capture twice.`,
  made: (s) => {
    const amount = money(s.capture.amount, s.charge?.currency ?? 'USD');
    return { note: `Shipped: ${amount} captured, once.`, say: `Order shipped: ${amount} captured.` };
  },
  failed: 'Nothing was captured, and the authorization still holds the money: Ship order tries again with a new capture id.',
};

const cancelWords: ActWords<Cancelled> = {
  noun: 'void',
  button: 'Cancel order',
  idName: 'void id',
  doing: 'Voiding',
  done: 'voided',
  offer: shipWords.offer,
  made: () => ({ note: 'Cancelled: the authorization is voided, and the card was never charged.', say: 'Order cancelled: nothing was charged.' }),
  failed: 'Nothing was released, and the authorization still holds the money: Cancel order tries again with a new void id.',
};

/** Ship order: offered while the authorization is open, busy while its capture is on its way, gone once shipped or cancelled. */
export function shipButtonView(s: OrderState): ButtonView {
  const p = s.ship;
  if (actBusy(p)) return { hidden: false, disabled: true, busy: true, label: 'Shipping…' };
  const gone = !orderOpen(s) || p.kind === 'succeeded' || p.kind === 'refused' || s.cancel.kind === 'succeeded';
  return { hidden: gone, disabled: !canShip(s), busy: false, label: 'Ship order' };
}

/** Cancel order: offered while nothing is captured of an open authorization, busy while its void is on its way. */
export function cancelButtonView(s: OrderState): ButtonView {
  const p = s.cancel;
  if (actBusy(p)) return { hidden: false, disabled: true, busy: true, label: 'Cancelling…' };
  const gone = !orderOpen(s) || p.kind === 'succeeded' || p.kind === 'refused' || s.ship.kind === 'succeeded';
  return { hidden: gone, disabled: !canCancel(s), busy: false, label: 'Cancel order' };
}

/** The note under the buttons: what they do, or how the last of them went. */
export function orderNote(s: OrderState): ActNote | null {
  return s.last === 'cancel' ? actNote(cancelWords, s.target, s.cancel) : actNote(shipWords, s.target, s.ship);
}

/** The live region's sentence about the order, or null while there is none to say. */
export function orderAnnouncement(s: OrderState): string | null {
  return s.last === 'cancel' ? actAnnouncement(cancelWords, s.target, s.cancel) : actAnnouncement(shipWords, s.target, s.ship);
}

/** Whether the order's act ended with this transition: the focus moves to the note then (its button may be gone). */
export function orderSettled(prev: OrderState, next: OrderState): boolean {
  return actSettled(prev.ship, next.ship) || actSettled(prev.cancel, next.cancel);
}

/** The outcome's title for a charge that only authorized, by where it stands now. */
export function orderTitle(c: Charge): string {
  const amount = (n: number) => money(n, c.currency);
  switch (c.captureStatus) {
    case 'UNCAPTURED':
      return `Authorized: ${amount(c.amount)}`;
    case 'PARTIALLY_CAPTURED':
      return `Captured ${amount(c.amountCaptured)} of ${amount(c.amount)}`;
    case 'CAPTURED':
      return `Order shipped: ${amount(c.amountCaptured)} captured`;
    case 'VOIDED':
      return 'Order cancelled: nothing charged';
    case 'EXPIRED':
      return 'The authorization expired';
  }
}

/** What the outcome says of an authorization, by where it stands now. */
export function orderLine(c: Charge): string {
  switch (c.captureStatus) {
    case 'UNCAPTURED':
    case 'PARTIALLY_CAPTURED':
      return `The card is authorized: ${money(c.amountCapturable, c.currency)} is held until ${expiryText(
        c.authorizationExpiresAt,
      )}. Nothing more is taken until the shop ships the order (Ship order captures it) or cancels it (Cancel order releases it).`;
    case 'CAPTURED':
      return `The shop shipped the order and took ${money(c.amountCaptured, c.currency)} of the authorization.`;
    case 'VOIDED':
      return 'The shop cancelled the order: the authorization is voided, and the money the card held is released.';
    case 'EXPIRED':
      return `The authorization lapsed at ${expiryText(c.authorizationExpiresAt)}: what was not captured is released.`;
  }
}

/** The capture facts of the outcome, with the test ids the browser tests read. */
export function captureFacts(c: Charge): { term: string; value: string; testid: string }[] {
  const facts = [
    { term: 'capture status', value: c.captureStatus, testid: 'capture-status' },
    { term: 'captured', value: money(c.amountCaptured, c.currency), testid: 'amount-captured' },
    { term: 'capturable', value: money(c.amountCapturable, c.currency), testid: 'amount-capturable' },
  ];
  if (c.authorizationExpiresAt) facts.push({ term: 'authorization expires', value: expiryText(c.authorizationExpiresAt), testid: 'authorization-expires' });
  return facts;
}

const times = (n: number) => (n === 1 ? 'once' : n === 2 ? 'twice' : `${n} times`);

/**
 * What the ledger's summary says of the provider's authorizations: " and
 * captured once", "; nothing captured yet", ", then voided"; "" when no
 * charge only authorized. The provider's captures and voids are the
 * ground truth, as its charges are.
 */
export function captureClause(ledger: Pick<Ledger, 'charges' | 'captures' | 'voids'>): string {
  const held = ledger.charges.filter((c) => c.status === 'succeeded' && c.capture_method === 'manual');
  if (!held.length) return '';
  const captured = ledger.captures.filter((c) => c.status === 'succeeded').length;
  if (captured) return ` and captured ${times(captured)}`;
  if (ledger.voids.length) return ', then voided: nothing was taken';
  if (held.some((c) => c.authorization_status === 'expired')) return ', and the authorization expired';
  return '; nothing captured yet';
}
