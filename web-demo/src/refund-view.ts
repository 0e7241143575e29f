// What the ledger's refund shows and says (refund.ts's state), and what the
// ledger's summary says of the provider's refunds: plain data, computed
// without a DOM, that render.ts paints. Unit-tested in refund-view.test.ts.
import type { Ledger } from './ledger';
import { canRefund, refundBusy, type RefundPhase, type RefundState } from './refund';
import { shortKey } from './rowtext';
import { money } from './shop';

export interface RefundButtonView {
  hidden: boolean;
  disabled: boolean;
  busy: boolean;
  label: string;
}

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
  if (refundBusy(p)) return { hidden: false, disabled: true, busy: true, label: 'Refunding…' };
  return { hidden: false, disabled: !canRefund(s), busy: false, label: 'Refund' };
}

export type RefundTone = 'neutral' | 'pending' | 'ok' | 'warn' | 'error';

/** The note under the button, which also describes it: what Refund does, or how the refund went. */
export interface RefundNote {
  text: string;
  tone: RefundTone;
}

const idText = (id: string) => `refund id ${shortKey(id)}`;

export function refundNote(s: RefundState): RefundNote | null {
  const t = s.target;
  if (!t) return null;
  const p = s.phase;
  const amount = money(t.amount, t.currency);
  switch (p.kind) {
    case 'none':
      return {
        text: `Refunds ${amount} in full through the shop's backend, which holds the secret key. One refund id per click, and every retry of it sends the same id, so a lost answer cannot refund twice.`,
        tone: 'neutral',
      };
    case 'sending':
      return { text: `Refunding ${amount} under ${idText(p.refundId)}…`, tone: 'pending' };
    case 'retrying':
      return {
        text:
          p.cause === 'lost'
            ? `The response was lost. Retrying with the same ${idText(p.refundId)}…`
            : `The shop's backend answered ${p.code}. Retrying with the same ${idText(p.refundId)}…`,
        tone: 'warn',
      };
    case 'processing':
      return { text: `PROCESSING: the provider has not confirmed the refund yet. The page asks again with the same ${idText(p.refundId)}.`, tone: 'pending' };
    case 'succeeded': {
      const replay = p.replayed
        ? p.lost
          ? ' replayed: true: the answer that was lost carried this refund, and the retry with the same id got it back, not a second one.'
          : ' replayed: true: the stored refund of an earlier request with the same id.'
        : '';
      return { text: `Refunded ${money(p.refund.amount, p.refund.currency)}: nothing remains to refund.${replay}`, tone: 'ok' };
    }
    case 'failed':
      return {
        text: `The refund failed: ${p.failure.message} (${p.failure.code}). Nothing went back, and its amount is refundable again: Refund tries with a new refund id.`,
        tone: 'error',
      };
    case 'refused':
      if (p.refundable === 0) return { text: `Nothing remains to refund: the charge is refunded in full. (${p.code})`, tone: 'neutral' };
      return { text: `The shop's backend refused the refund: ${p.message} (${p.code ?? 'no code'}). Nothing was refunded.`, tone: 'error' };
    case 'unknown':
      return {
        text: `${
          p.code ? `The shop's backend answered ${p.code} to the last of ${p.tries} tries` : `No answer after ${p.tries} tries`
        }: the refund may or may not have been made. Refund sends the same ${idText(p.refundId)} again, so it cannot refund twice.`,
        tone: 'warn',
      };
  }
}

/** The live region's sentence about the refund, or null while there is none to say. */
export function refundAnnouncement(s: RefundState): string | null {
  const p = s.phase;
  if (!s.target) return null;
  switch (p.kind) {
    case 'none':
      return null;
    case 'sending':
      return 'Refunding.';
    case 'retrying':
      return p.cause === 'lost' ? "The refund's response was lost. Retrying with the same refund id." : 'The shop is busy. Retrying the refund with the same refund id.';
    case 'processing':
      return 'Refund processing.';
    case 'succeeded':
      return `Refunded ${money(p.refund.amount, p.refund.currency)}.`;
    case 'failed':
      return `Refund failed: ${p.failure.message}`;
    case 'refused':
      return p.refundable === 0 ? 'Nothing remains to refund.' : `Refund refused: ${p.code ?? p.message}.`;
    case 'unknown':
      return 'Refund not confirmed. Refund sends the same refund id again.';
  }
}

/** Whether the refund's outcome arrived with this transition: the focus moves to the note then (the button may be gone). */
export function refundSettled(prev: RefundPhase, next: RefundPhase): boolean {
  return refundBusy(prev) && !refundBusy(next);
}

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
