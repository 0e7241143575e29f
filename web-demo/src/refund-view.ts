// What the ledger's refund shows and says (refund.ts's state), and what the
// ledger's summary says of the provider's refunds: plain data, computed
// without a DOM, that render.ts paints. Unit-tested in refund-view.test.ts.
import { actAnnouncement, actNote, type ActNote, type ActWords, type ButtonView } from './act-view';
import { actBusy, actSettled } from './desk';
import type { Ledger } from './ledger';
import { canRefund, type Refunded, type RefundPhase, type RefundState } from './refund';
import { money } from './shop';

export type RefundButtonView = ButtonView;

/**
 * The Refund button: offered once the charge SUCCEEDED, busy while the
 * refund is on its way, gone once nothing remains to refund. Its name
 * stays Refund whenever it can be pressed; the note says what it does.
 */
export function refundButtonView(s: RefundState): RefundButtonView {
  const p = s.phase;
  if (!s.target || p.kind === 'succeeded' || (p.kind === 'refused' && p.refundable === 0)) {
    return { hidden: true, disabled: true, busy: false, label: 'Refund' };
  }
  if (actBusy(p)) return { hidden: false, disabled: true, busy: true, label: 'Refunding…' };
  return { hidden: false, disabled: !canRefund(s), busy: false, label: 'Refund' };
}

/** How a refund speaks of itself. */
const refundWords: ActWords<Refunded> = {
  noun: 'refund',
  button: 'Refund',
  idName: 'refund id',
  doing: 'Refunding',
  done: 'refunded',
  offer: (amount) =>
    `Refunds ${amount} in full through the shop's backend, which holds the secret key. One refund id per click, and every retry of it sends the same id, so a lost answer cannot refund twice.`,
  made: ({ refund: r }) => ({ note: `Refunded ${money(r.amount, r.currency)}: nothing remains to refund.`, say: `Refunded ${money(r.amount, r.currency)}.` }),
  failed: 'Nothing went back, and its amount is refundable again: Refund tries with a new refund id.',
  exhausted: (p) =>
    p.refundable === 0 ? { note: `Nothing remains to refund: the charge is refunded in full. (${p.code})`, say: 'Nothing remains to refund.' } : null,
};

/** The note under the button, which also describes it: what Refund does, or how the refund went. */
export const refundNote = (s: RefundState): ActNote | null => actNote(refundWords, s.target, s.phase);

/** The live region's sentence about the refund, or null while there is none to say. */
export const refundAnnouncement = (s: RefundState): string | null => actAnnouncement(refundWords, s.target, s.phase);

/** Whether the refund's outcome arrived with this transition: the focus moves to the note then (the button may be gone). */
export const refundSettled = (prev: RefundPhase, next: RefundPhase) => actSettled(prev, next);

const times = (n: number) => (n === 1 ? 'once' : n === 2 ? 'twice' : `${n} times`);

/**
 * What the ledger's summary adds about the provider's refunds of the
 * charges: " and refunded once", a pending refund, a failed one; "" for
 * none. The provider's refunds are the ground truth, as its charges are.
 */
export function refundClause(ledger: Pick<Ledger, 'refunds'>): string {
  const by = (status: string) => ledger.refunds.filter((r) => r.status === status).length;
  const done = by('succeeded');
  const pending = by('pending');
  const failed = by('failed');
  const parts: string[] = [];
  if (done) parts.push(` and refunded ${times(done)}`);
  if (pending) parts.push(`${done ? ';' : ','} ${pending === 1 ? 'a refund is' : `${pending} refunds are`} pending`);
  if (failed && !done && !pending) parts.push(`; ${failed === 1 ? 'its refund' : `${failed} refunds`} failed`);
  return parts.join('');
}
