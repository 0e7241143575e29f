// What the ledger's refund shows and says (refund-view.ts), and what the
// ledger's summary says of the provider's refunds (and fetchLedger, which
// reads them).
import { describe, expect, it } from 'vitest';
import { fetchLedger, type ProviderRefund } from './ledger';
import type { Refund, RefundPhase, RefundState, RefundTarget } from './refund';
import { refundAnnouncement, refundButtonView, refundClause, refundNote, refundSettled } from './refund-view';
import { announcement } from './view';
import { paidWith } from './fakes';

const target: RefundTarget = { chargeId: 'c1', amount: 11300, currency: 'USD' };
const refund: Refund = { id: 'r1', chargeId: 'c1', amount: 11300, currency: 'USD', providerRefundId: 're_1', status: 'SUCCEEDED', createdAt: '2026-01-01T00:00:00Z' };
const at = (phase: RefundPhase): RefundState => ({ target, phase });

describe('refundButtonView', () => {
  it.each<[string, RefundState, { hidden: boolean; disabled: boolean; label: string }]>([
    ['no charge to refund', { target: null, phase: { kind: 'none' } }, { hidden: true, disabled: true, label: 'Refund' }],
    ['a charge that SUCCEEDED', at({ kind: 'none' }), { hidden: false, disabled: false, label: 'Refund' }],
    ['on its way', at({ kind: 'sending', id: 'rf-1', try: 1 }), { hidden: false, disabled: true, label: 'Refunding…' }],
    ['a lost answer, retried', at({ kind: 'retrying', id: 'rf-1', cause: 'lost', code: null, waitMs: 500 }), { hidden: false, disabled: true, label: 'Refunding…' }],
    ['PROCESSING', at({ kind: 'processing', id: 'rf-1', retryAfterMs: 1000 }), { hidden: false, disabled: true, label: 'Refunding…' }],
    ['refunded', at({ kind: 'succeeded', id: 'rf-1', made: { refund }, replayed: false, lost: false }), { hidden: true, disabled: true, label: 'Refund' }],
    ['refunded in full elsewhere', at({ kind: 'refused', id: 'rf-1', code: 'REFUND_EXCEEDS_CHARGE', message: '', refundable: 0 }), { hidden: true, disabled: true, label: 'Refund' }],
    ['the outcome unknown', at({ kind: 'unknown', id: 'rf-1', code: null, tries: 3 }), { hidden: false, disabled: false, label: 'Refund' }],
    ['failed', at({ kind: 'failed', id: 'rf-1', failure: { code: 'expired_or_canceled_card', message: 'closed' } }), { hidden: false, disabled: false, label: 'Refund' }],
  ])('%s', (_, s, want) => {
    expect(refundButtonView(s)).toMatchObject(want);
  });
});

describe('refundNote and refundAnnouncement', () => {
  it('a refund whose answer was lost: the retry got it back, not a second one', () => {
    const s = at({ kind: 'succeeded', id: 'rf-1', made: { refund }, replayed: true, lost: true });
    expect(refundNote(s)).toEqual({
      text: 'Refunded $113.00: nothing remains to refund. replayed: true: the answer that was lost carried this refund, and the retry with the same id got it back, not a second one.',
      tone: 'ok',
    });
    expect(refundAnnouncement(s)).toBe('Refunded $113.00.');
  });

  it('the outcome unknown: Refund sends the same refund id', () => {
    const s = at({ kind: 'unknown', id: '0b4c8d8e-1111-4a4a-9c9c-000000000001', code: null, tries: 3 });
    expect(refundNote(s)?.text).toBe(
      'No answer after 3 tries: the refund may or may not have been made. Refund sends the same refund id 0b4c8d8e…0001 again, so it cannot refund twice.',
    );
  });

  it("the payment's live region says the refund's news once one is asked for, and the payment's before", () => {
    const paid = paidWith({ id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-01-01T00:00:00Z', captureStatus: 'CAPTURED', amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null });
    const ctx = { unsafe: false, ledger: null, keysSent: 1, responseLost: false };
    expect(announcement(paid, { ...ctx, refund: at({ kind: 'none' }) })).toBe('Payment received.');
    expect(announcement(paid, { ...ctx, refund: at({ kind: 'retrying', id: 'rf-1', cause: 'lost', code: null, waitMs: 500 }) })).toBe(
      "The refund's response was lost. Retrying with the same refund id.",
    );
    expect(announcement(paid, { ...ctx, refund: at({ kind: 'succeeded', id: 'rf-1', made: { refund }, replayed: true, lost: true }) })).toBe(
      'Refunded $113.00.',
    );
  });

  it('the outcome arrives when the refund stops waiting for an answer', () => {
    const sending: RefundPhase = { kind: 'sending', id: 'rf-1', try: 1 };
    expect(refundSettled(sending, { kind: 'succeeded', id: 'rf-1', made: { refund }, replayed: false, lost: false })).toBe(true);
    expect(refundSettled(sending, { kind: 'unknown', id: 'rf-1', code: null, tries: 3 })).toBe(true);
    expect(refundSettled(sending, { kind: 'processing', id: 'rf-1', retryAfterMs: 1000 })).toBe(false);
    expect(refundSettled({ kind: 'none' }, { kind: 'succeeded', id: 'rf-1', made: { refund }, replayed: false, lost: false })).toBe(false);
  });
});

const providerRefund = (status: ProviderRefund['status'], id = `re_${status}`): ProviderRefund => ({
  id,
  amount: 11300,
  currency: 'usd',
  status,
  charge: 'ch_1',
  failure_code: null,
  metadata: {},
  created: 1,
});

describe('refundClause', () => {
  it.each<[ProviderRefund['status'][], string]>([
    [[], ''],
    [['succeeded'], ' and refunded once'],
    [['succeeded', 'succeeded'], ' and refunded twice'],
    [['pending'], ', a refund is pending'],
    [['succeeded', 'pending'], ' and refunded once; a refund is pending'],
    [['failed'], '; its refund failed'],
  ])('%j: "%s"', (statuses, want) => {
    expect(refundClause({ refunds: statuses.map((s, i) => providerRefund(s, `re_${i}`)) })).toBe(want);
  });
});

describe('fetchLedger', () => {
  it("reads the refunds of each charge that took money, by the provider's charge id", async () => {
    const asked: string[] = [];
    const ledger = await fetchLedger(['k1'], 'demo', (async (url: string) => {
      asked.push(url);
      const data = url.startsWith('/provider/v1/charges')
        ? [
            { id: 'ch_1', status: 'succeeded', created: 1 },
            { id: 'ch_0', status: 'failed', created: 0 },
          ]
        : [providerRefund('succeeded')];
      return new Response(JSON.stringify({ data }));
    }) as typeof fetch);
    expect(asked).toEqual(['/provider/v1/charges?merchant=demo&client_idempotency_key=k1', '/provider/v1/refunds?merchant=demo&charge=ch_1']);
    expect(ledger.succeeded).toBe(1);
    expect(ledger.refunds.map((r) => r.id)).toEqual(['re_succeeded']);
  });
});
