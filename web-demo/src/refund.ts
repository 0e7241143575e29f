// The shop's refund of the charge the page paid, through the shop's
// backend: the page never holds the secret key that refunds take. It asks
// the backend (in development, chargeonce serves a small one at
// /demo/refund), which calls refundCharge with the merchant's secret key,
// on the server, under the page's refund id: an act of the desk (desk.ts),
// run by the library's runner, one refund id per refund, sent with every
// retry and after a reload. What it refunds is what the charge took: all of
// an automatic charge, what the shop captured of an authorization
// (order.ts).
import type { Charge } from '@chargeonce/client';
// chargeonce's refund, as the backend answers it (refundCharge's payload): the library's type.
import type { Refund } from '@chargeonce/client/server';
import { refundAct } from './backend';
import { shownOf, type CheckoutState } from './checkout-state';
import { actOperation, canAct, Desk, type ActPhase, type ActState, type ActTarget, type DeskOptions, type SettledAct } from './desk';

export type { Refund };

/** What a refund made. */
export interface Refunded {
  refund: Refund;
}

export type RefundTarget = ActTarget;
export type RefundPhase = ActPhase<Refunded>;
export type RefundState = ActState<Refunded>;

/** The refund of what remains of a charge, under the record's key as its refund id: sent to the shop's backend through base. */
export const refundOperation = (base: typeof fetch = fetch) =>
  actOperation<Refunded>(refundAct, (p) => (p.refund ? { refund: p.refund as Refund } : null), base);

/**
 * The charge of a checkout that SUCCEEDED, as it is now (now: what the
 * shop's later acts answered of it, when newer than the checkout's
 * outcome), while it took money; null while there is none to refund.
 */
export function refundTarget(s: CheckoutState, now?: Charge | null): RefundTarget | null {
  const shown = shownOf(s);
  if (shown.kind !== 'final' || shown.c.outcome.status !== 'SUCCEEDED') return null;
  const paid = shown.c.outcome.charge;
  const c = now?.id === paid.id ? now : paid;
  if (!(c.amountCaptured > 0)) return null; // an authorization: nothing was taken yet
  return { chargeId: c.id, amount: c.amountCaptured, currency: c.currency };
}

/** After a refund that settled, another may go: after a failure, or a refusal that leaves some. */
const again = (p: SettledAct<Refunded>) => p.kind === 'failed' || (p.kind === 'refused' && p.refundable !== 0);

/** Whether Refund may be pressed: a first refund, the unknown one again, or one more after a failure or with some left. */
export const canRefund = (s: RefundState) => canAct(s, again);

/** The record's name of a charge's refund, before the charge's id, in the store. */
export const refundName = 'refund';

/** The refund of the page's charge: the desk of refunds, sent through fetch. */
export class RefundDesk extends Desk<Refunded> {
  constructor(o: Omit<DeskOptions<Refunded>, 'name' | 'op' | 'again'> & { fetch?: typeof fetch }) {
    const { fetch: base, ...rest } = o;
    super({ ...rest, name: refundName, op: refundOperation(base), again });
  }

  /** Refund: the whole of what remains of the charge. */
  refund(): boolean {
    return this.act();
  }
}
