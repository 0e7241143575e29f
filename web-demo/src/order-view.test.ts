// What the order of an authorization shows and says (order-view.ts), what
// the outcome says of a charge that only authorized (view.ts), what the
// ledger's summary says of the provider's captures and voids, and
// fetchLedger, which reads them.
import type { Charge } from '@chargeonce/client';
import { describe, expect, it } from 'vitest';
import { idleState, type CheckoutState } from './checkout-state';
import { checkoutOf, paidWith } from './fakes';
import { fetchLedger, type ProviderCapture, type ProviderCharge } from './ledger';
import type { OrderState, Shipped } from './order';
import { cancelButtonView, captureClause, captureFacts, orderAnnouncement, orderNote, shipButtonView } from './order-view';
import { announcement, captureChoiceView, outcomeView, type RenderContext } from './view';

const details = { id: 'c1', amount: 11300, currency: 'USD', orderId: null, providerChargeId: 'ch_1', createdAt: '2026-01-01T00:00:00Z' };
const authorized: Charge = { ...details, captureStatus: 'UNCAPTURED', amountCaptured: 0, amountCapturable: 11300, authorizationExpiresAt: '2026-01-08T15:00:00Z' };
const captured: Charge = { ...details, captureStatus: 'CAPTURED', amountCaptured: 11300, amountCapturable: 0, authorizationExpiresAt: null };
const voided: Charge = { ...details, captureStatus: 'VOIDED', amountCaptured: 0, amountCapturable: 0, authorizationExpiresAt: null };
const target = { chargeId: 'c1', amount: 11300, currency: 'USD', charge: authorized };
const made: Shipped = { capture: { id: 'cap1', chargeId: 'c1', amount: 11300, final: true, createdAt: '2026-01-02T00:00:00Z' }, charge: captured };

const at = (over: Partial<OrderState>): OrderState => ({ target, ship: { kind: 'none' }, cancel: { kind: 'none' }, last: 'ship', ...over });

describe('Ship order and Cancel order', () => {
  it.each<[string, OrderState, { ship: Partial<ReturnType<typeof shipButtonView>>; cancel: Partial<ReturnType<typeof cancelButtonView>> }]>([
    ['no order', { ...at({}), target: null }, { ship: { hidden: true }, cancel: { hidden: true } }],
    ['authorized', at({}), { ship: { hidden: false, disabled: false, label: 'Ship order' }, cancel: { hidden: false, disabled: false, label: 'Cancel order' } }],
    [
      'shipping, its answer lost',
      at({ ship: { kind: 'retrying', id: 'cap-1', cause: 'lost', code: null, waitMs: 500 } }),
      { ship: { hidden: false, disabled: true, busy: true, label: 'Shipping…' }, cancel: { hidden: false, disabled: true } },
    ],
    ['shipped', at({ ship: { kind: 'succeeded', id: 'cap-1', made, replayed: true, lost: true } }), { ship: { hidden: true }, cancel: { hidden: true } }],
    [
      'cancelling',
      at({ cancel: { kind: 'sending', id: 'v-1', try: 1 }, last: 'cancel' }),
      { ship: { hidden: false, disabled: true }, cancel: { disabled: true, busy: true, label: 'Cancelling…' } },
    ],
    [
      'the capture unknown: Ship order again (its own id), Cancel order too',
      at({ ship: { kind: 'unknown', id: 'cap-1', code: null, tries: 3 } }),
      { ship: { hidden: false, disabled: false }, cancel: { hidden: false, disabled: false } },
    ],
    [
      'refused: the authorization lapsed',
      at({ ship: { kind: 'refused', id: 'cap-1', code: 'AUTHORIZATION_EXPIRED', message: 'lapsed' } }),
      { ship: { hidden: true }, cancel: { hidden: false } },
    ],
    ['an authorization the outcome says is voided already', at({ target: { ...target, charge: voided } }), { ship: { hidden: true }, cancel: { hidden: true } }],
  ])('%s', (_, s, want) => {
    expect(shipButtonView(s)).toMatchObject(want.ship);
    expect(cancelButtonView(s)).toMatchObject(want.cancel);
  });

  it('the note: what the buttons do, then how the last act went; a lost answer replayed is said so, once', () => {
    expect(orderNote(at({}))?.text).toMatch(/^Ship order captures the \$113\.00 the card holds, and Cancel order voids the authorization/);
    const s = at({ ship: { kind: 'succeeded', id: 'cap-1', made, replayed: true, lost: true } });
    expect(orderNote(s)).toEqual({
      text: 'Shipped: $113.00 captured, once. replayed: true: the answer that was lost carried this capture, and the retry with the same id got it back, not a second one.',
      tone: 'ok',
    });
    expect(orderAnnouncement(s)).toBe('Order shipped: $113.00 captured.');
    const unknown = at({ ship: { kind: 'unknown', id: '0b4c8d8e-1111-4a4a-9c9c-000000000001', code: null, tries: 3 } });
    expect(orderNote(unknown)?.text).toBe(
      'No answer after 3 tries: the capture may or may not have been made. Ship order sends the same capture id 0b4c8d8e…0001 again, so it cannot capture twice.',
    );
    const cancelledLast = at({ ship: { kind: 'failed', id: 'cap-1', failure: { code: 'card_declined', message: 'no' } }, cancel: { kind: 'sending', id: 'v-1', try: 1 }, last: 'cancel' });
    expect(orderNote(cancelledLast)?.text).toMatch(/^Voiding \$113\.00 under void id v-1…$/);
    expect(orderAnnouncement(cancelledLast)).toBe('Voiding.');
  });
});

const paid = paidWith;
const ctx: RenderContext = { unsafe: false, ledger: null, keysSent: 1, responseLost: false };
const facts = (v: ReturnType<typeof outcomeView>) => Object.fromEntries((v?.facts ?? []).map((f) => [f.testid ?? f.term, f.value]));

describe('the outcome of a charge that only authorized', () => {
  it('says it is authorized, with what the card holds and until when, and where the order now stands', () => {
    const v = outcomeView(paid(authorized), { ...ctx, order: at({}) });
    expect(v).toMatchObject({ tone: 'success', pill: 'SUCCEEDED', title: 'Authorized: $113.00' });
    expect(facts(v)).toMatchObject({ 'capture-status': 'UNCAPTURED', 'amount-captured': '$0.00', 'amount-capturable': '$113.00' });
    expect(facts(v)['authorization-expires']).toBeTruthy();
    expect(announcement(paid(authorized), { ...ctx, order: at({}) })).toBe('Payment authorized.');

    const shipped = at({ ship: { kind: 'succeeded', id: 'cap-1', made, replayed: false, lost: false } });
    const after = outcomeView(paid(authorized), { ...ctx, order: shipped });
    expect(after).toMatchObject({ title: 'Order shipped: $113.00 captured' });
    expect(facts(after)).toMatchObject({ 'capture-status': 'CAPTURED', 'amount-captured': '$113.00', 'amount-capturable': '$0.00' });
    expect(facts(after)).not.toHaveProperty('authorization-expires');
    expect(announcement(paid(authorized), { ...ctx, order: shipped })).toBe('Order shipped: $113.00 captured.');
  });

  it('a charge captured at once shows no capture facts, as before', () => {
    const v = outcomeView(paid(captured), ctx);
    expect(v?.title).toBe('Payment received: $113.00');
    expect(facts(v)).not.toHaveProperty('capture-status');
    expect(captureFacts(captured).map((f) => f.testid)).toEqual(['capture-status', 'amount-captured', 'amount-capturable']);
  });

  it("the capture-later choice is the shopper's until the cart's session fixes it", () => {
    const idle: CheckoutState = idleState();
    expect(captureChoiceView(idle, {})).toEqual({ checked: null, disabled: false });
    expect(captureChoiceView(checkoutOf(idle.charger, { step: { kind: 'starting' } }), { captureMethod: null })).toEqual({ checked: null, disabled: true });
    expect(captureChoiceView(idle, { captureMethod: 'MANUAL' })).toEqual({ checked: true, disabled: true });
    expect(captureChoiceView(paid(captured), { captureMethod: 'AUTOMATIC' })).toEqual({ checked: false, disabled: true });
  });
});

const charge = (over: Partial<ProviderCharge>): ProviderCharge => ({
  id: 'ch_1',
  amount: 11300,
  currency: 'usd',
  status: 'succeeded',
  payment_method: 'pm_card_visa',
  failure_code: null,
  metadata: {},
  created: 1,
  capture_method: 'manual',
  authorization_status: 'open',
  ...over,
});
const providerCapture = (status: ProviderCapture['status'], id: string): ProviderCapture => ({
  id,
  amount: 11300,
  currency: 'usd',
  final: true,
  status,
  charge: 'ch_1',
  idempotency_key: `pk-${id}`,
  metadata: {},
  created: 2,
});

describe('captureClause', () => {
  it.each<[string, Partial<ProviderCharge>, ProviderCapture['status'][], number, string]>([
    ['captured at once', { capture_method: 'automatic', authorization_status: null }, [], 0, ''],
    ['authorized', {}, [], 0, '; nothing captured yet'],
    ['captured once', { authorization_status: 'captured' }, ['succeeded'], 0, ' and captured once'],
    ['a declined capture is no capture', {}, ['failed'], 0, '; nothing captured yet'],
    ['voided', { authorization_status: 'voided' }, [], 1, ', then voided: nothing was taken'],
    ['expired', { authorization_status: 'expired' }, [], 0, ', and the authorization expired'],
  ])('%s', (_, over, captures, voids, want) => {
    const ledger = {
      charges: [charge(over)],
      captures: captures.map((s, i) => providerCapture(s, `cp_${i}`)),
      voids: Array.from({ length: voids }, (_, i) => ({ id: `vd_${i}`, charge: 'ch_1', idempotency_key: 'k', metadata: {}, created: 3 })),
    };
    expect(captureClause(ledger)).toBe(want);
  });
});

describe('fetchLedger', () => {
  it('reads the captures and voids of each charge that only authorized, and none of a charge captured at once', async () => {
    const asked: string[] = [];
    const ledger = await fetchLedger(['k1', 'k2'], 'demo', (async (url: string) => {
      asked.push(url);
      const data = url.includes('client_idempotency_key=k1')
        ? [charge({ id: 'ch_1' })]
        : url.includes('client_idempotency_key=k2')
          ? [charge({ id: 'ch_2', capture_method: 'automatic', authorization_status: null, created: 2 })]
          : url.startsWith('/provider/v1/captures')
            ? [providerCapture('succeeded', 'cp_1')]
            : [];
      return new Response(JSON.stringify({ data }));
    }) as typeof fetch);
    expect(asked.filter((u) => !u.startsWith('/provider/v1/charges')).sort()).toEqual([
      '/provider/v1/captures?merchant=demo&charge=ch_1',
      '/provider/v1/refunds?merchant=demo&charge=ch_1',
      '/provider/v1/refunds?merchant=demo&charge=ch_2',
      '/provider/v1/voids?merchant=demo&charge=ch_1',
    ]);
    expect(ledger.captures.map((c) => c.id)).toEqual(['cp_1']);
    expect(ledger.voids).toEqual([]);
  });
});
