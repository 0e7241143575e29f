// Draws a checkout state (checkout.ts) into index.html. It decides nothing:
// what to show comes from view.ts (and rowtext.ts for the timeline), and
// this file puts it into the DOM.
import type { ActNote, ButtonView } from './act-view';
import { actOf } from './backend';
import { attemptOf, type CheckoutState } from './checkout-state';
import type { Ledger, ProviderCharge, ProviderRefund } from './ledger';
import type { OrderState } from './order';
import { cancelButtonView, captureClause, orderNote, shipButtonView } from './order-view';
import type { RefundState } from './refund';
import { refundButtonView, refundClause, refundNote } from './refund-view';
import { cards, money } from './shop';
import type { RequestRecord } from './timeline';
import { describeRequest, shortKey } from './rowtext';
import {
  announcement,
  authenticateButtonView,
  captureChoiceView,
  lockedNote,
  newAttemptLabel,
  outcomeView,
  payButtonView,
  type OutcomeView,
  type RenderContext,
} from './view';

/** The elements of index.html that the page draws into. */
export interface Elements {
  form: HTMLFormElement;
  cards: HTMLFieldSetElement;
  lockedNote: HTMLParagraphElement;
  captureLater: HTMLInputElement;
  dropNext: HTMLInputElement;
  unsafe: HTMLInputElement;
  pay: HTMLButtonElement;
  authenticate: HTMLButtonElement;
  outcome: HTMLElement;
  outcomeSpinner: HTMLElement;
  outcomePill: HTMLElement;
  outcomeTitle: HTMLHeadingElement;
  outcomeBody: HTMLElement;
  newAttempt: HTMLButtonElement;
  announce: HTMLElement;
  attemptKey: HTMLElement;
  timeline: HTMLOListElement;
  ledger: HTMLUListElement;
  ledgerSummary: HTMLParagraphElement;
  refundBox: HTMLElement;
  refund: HTMLButtonElement;
  refundNote: HTMLParagraphElement;
  orderBox: HTMLElement;
  ship: HTMLButtonElement;
  cancel: HTMLButtonElement;
  orderNote: HTMLParagraphElement;
}

export function elements(doc: Document): Elements {
  const el = <T extends HTMLElement>(id: string): T => {
    const e = doc.getElementById(id);
    if (!e) throw new Error(`#${id} is missing from index.html`);
    return e as T;
  };
  return {
    form: el('pay-form'),
    cards: el('cards'),
    lockedNote: el('locked-note'),
    captureLater: el('capture-later'),
    dropNext: el('drop-next'),
    unsafe: el('unsafe'),
    pay: el('pay'),
    authenticate: el('authenticate'),
    outcome: el('outcome'),
    outcomeSpinner: el('outcome-spinner'),
    outcomePill: el('outcome-pill'),
    outcomeTitle: el('outcome-title'),
    outcomeBody: el('outcome-body'),
    newAttempt: el('new-attempt'),
    announce: el('announce'),
    attemptKey: el('attempt-key'),
    timeline: el('timeline'),
    ledger: el('ledger'),
    ledgerSummary: el('ledger-summary'),
    refundBox: el('refund-box'),
    refund: el('refund'),
    refundNote: el('refund-note'),
    orderBox: el('order-box'),
    ship: el('ship'),
    cancel: el('cancel'),
    orderNote: el('order-note'),
  };
}

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<Record<string, string>> = {},
  ...children: (Node | string | null | false)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) if (v !== undefined) e.setAttribute(k, v);
  for (const c of children) if (c !== null && c !== false) e.append(c);
  return e;
}

/** The card choice, once. */
export function paintCards(el: Elements): void {
  cards.forEach((c, i) => {
    const id = `card-${c.token}`;
    el.cards.append(
      h(
        'label',
        { class: 'card-option', for: id },
        h('input', { type: 'radio', name: 'card', id, value: c.token, ...(i === 0 ? { checked: '' } : {}) }),
        h('span', { class: `card-brand card-brand-${c.brand.toLowerCase()}`, 'aria-hidden': 'true' }, c.mark),
        h('span', { class: 'card-text' }, h('span', { class: 'card-number' }, `${c.brand} •••• ${c.last4}`), h('small', {}, c.behaviour)),
      ),
    );
  });
}

/** The card the shopper picked. */
export function chosenCard(el: Elements): string {
  return el.cards.querySelector<HTMLInputElement>('input[name="card"]:checked')?.value ?? cards[0].token;
}

/** How the shopper wants the money taken: MANUAL when the order is captured once it ships. */
export function chosenCapture(el: Elements): 'AUTOMATIC' | 'MANUAL' {
  return el.captureLater.checked ? 'MANUAL' : 'AUTOMATIC';
}

/** Draws the state: the controls, the attempt's key, the outcome and the live region. */
export function paint(el: Elements, s: CheckoutState, ctx: RenderContext): void {
  const pay = payButtonView(s);
  el.pay.hidden = pay.hidden;
  el.pay.disabled = pay.disabled;
  el.pay.setAttribute('aria-busy', String(pay.busy));
  if (el.pay.textContent !== pay.label) el.pay.textContent = pay.label;

  const auth = authenticateButtonView(s);
  el.authenticate.hidden = auth.hidden;
  el.authenticate.disabled = auth.disabled;
  el.authenticate.setAttribute('aria-busy', String(auth.busy));
  if (el.authenticate.textContent !== auth.label) el.authenticate.textContent = auth.label;

  // The card of an attempt is fixed until the attempt is over.
  const attempt = attemptOf(s);
  for (const r of el.cards.querySelectorAll<HTMLInputElement>('input[name="card"]')) {
    r.disabled = attempt !== null;
    // A key taken from the return's address came without its card: none is shown as the attempt's.
    if (attempt) r.checked = r.value === attempt.input?.paymentMethod;
  }
  const note = lockedNote(s, ctx);
  el.lockedNote.hidden = note === null;
  el.lockedNote.textContent = note ?? '';

  const capture = captureChoiceView(s, ctx);
  el.captureLater.disabled = capture.disabled;
  if (capture.checked !== null) el.captureLater.checked = capture.checked;

  const again = newAttemptLabel(s);
  el.newAttempt.hidden = again === null;
  if (again) el.newAttempt.textContent = again;

  el.attemptKey.textContent = attempt ? attempt.key : 'none yet: minted when you pay';
  el.attemptKey.classList.toggle('muted', !attempt);

  paintOutcome(el, outcomeView(s, ctx));
  const say = announcement(s, ctx);
  // Only news is written: rewriting the same words would read them again.
  if (el.announce.textContent !== say) el.announce.textContent = say;
}

function paintOutcome(el: Elements, v: OutcomeView | null): void {
  el.outcome.hidden = v === null;
  el.outcome.className = v ? `outcome is-${v.tone}` : 'outcome';
  // The heading stays the same element, so that the focus on it survives a redraw.
  if (el.outcomeTitle.textContent !== (v?.title ?? '')) el.outcomeTitle.textContent = v?.title ?? '';
  el.outcomeSpinner.hidden = !v?.spinner;
  el.outcomePill.hidden = !v?.pill;
  el.outcomePill.className = v?.pill ? `pill pill-${v.pill.toLowerCase()}` : 'pill';
  el.outcomePill.textContent = v?.pill ?? '';
  if (!v) {
    el.outcomeBody.replaceChildren();
    return;
  }
  const body: Node[] = [];
  for (const line of v.lines) {
    body.push(
      h(
        'p',
        { class: line.className, 'data-testid': line.testid },
        ...line.parts.map((part) =>
          typeof part === 'string'
            ? part
            : h(part.code ? 'code' : 'span', { class: part.className, 'data-testid': part.testid }, part.text),
        ),
      ),
    );
  }
  if (v.facts.length) {
    body.push(
      h(
        'dl',
        { class: 'facts' },
        ...v.facts.map((f) =>
          h('div', { class: f.wide ? 'wide' : undefined }, h('dt', {}, f.term), h('dd', {}, h('code', { 'data-testid': f.testid }, f.value))),
        ),
      ),
    );
  }
  el.outcomeBody.replaceChildren(...body);
}

/** Moves the focus to the outcome's heading, where a screen reader reads the result. */
export function focusOutcome(el: Elements): void {
  el.outcomeTitle.focus();
}

export function paintTimeline(el: Elements, rows: readonly RequestRecord[]): void {
  if (rows.length === 0) {
    el.timeline.replaceChildren(h('li', { class: 'empty' }, 'No request yet.'));
    return;
  }
  const firstKey = rows[0].idempotencyKey;
  el.timeline.replaceChildren(
    ...rows.map((r) => {
      const d = describeRequest(r);
      return h(
        'li',
        {
          class: `tl tl-${d.tone}`,
          'data-testid': 'request',
          'data-operation': r.operation,
          'data-outcome': r.outcome,
          'data-key': r.idempotencyKey,
          'data-status': r.status ?? '',
          'data-replayed': r.replayed === undefined ? '' : String(r.replayed),
          'data-next-action': r.nextAction ?? '',
        },
        h('span', { class: 'tl-n' }, `#${r.n}`),
        h(
          'span',
          { class: 'tl-body' },
          h('span', { class: 'tl-op' }, r.operation, r.fault ? h('span', { class: 'tag tag-fault' }, 'response dropped') : null),
          h(
            'span',
            { class: 'tl-key' },
            // An act of the shop's backend has a key of its own by design: only a charge's other key is news.
            actOf(r.operation) ? `${actOf(r.operation)!.idName} ` : 'key ',
            h('code', { title: r.idempotencyKey }, shortKey(r.idempotencyKey)),
            !actOf(r.operation) && r.idempotencyKey !== firstKey ? h('span', { class: 'tag tag-danger' }, 'new key') : null,
          ),
          h('span', { class: 'tl-result' }, d.text),
        ),
      );
    }),
  );
}

/** The pill colour of a provider charge's status. */
const pillOf: Record<ProviderCharge['status'], string> = {
  succeeded: 'succeeded',
  failed: 'failed',
  requires_action: 'processing',
  canceled: 'failed',
};

/** The pill colour of a provider refund's status. */
const refundPillOf: Record<ProviderRefund['status'], string> = {
  succeeded: 'succeeded',
  failed: 'failed',
  pending: 'processing',
};

/** Why no money moved, as the provider's charges say. */
function nothingMoved(ledger: Ledger): string {
  const statuses = new Set(ledger.charges.map((c) => c.status));
  if (statuses.has('requires_action')) return 'No money moved yet: the bank waits for the shopper to authenticate.';
  if (statuses.has('canceled') && !statuses.has('failed')) return 'No money moved: the payment was cancelled.';
  return 'No money moved: the provider declined the charge.';
}

/** An authorization's standing, as the ledger names it, and its pill colour. */
const authorizationOf: Record<string, { label: string; pill: string }> = {
  open: { label: 'authorized', pill: 'processing' },
  captured: { label: 'captured', pill: 'succeeded' },
  voided: { label: 'voided', pill: 'failed' },
  expired: { label: 'expired', pill: 'failed' },
};

/** Where a provider charge stands: an authorization says how far it got, any other charge its status. */
const standing = (c: ProviderCharge) =>
  c.status === 'succeeded' && c.capture_method === 'manual' ? authorizationOf[c.authorization_status ?? 'open']! : { label: c.status, pill: pillOf[c.status] };

export function paintLedger(el: Elements, ledger: Ledger | null, keysSent: number): void {
  const summary = el.ledgerSummary;
  summary.className = 'ledger-summary';
  if (!ledger || ledger.charges.length === 0) {
    el.ledger.replaceChildren();
    summary.textContent = keysSent ? 'No charge at the provider for this attempt.' : 'Nothing charged yet.';
    summary.dataset.succeeded = '0';
    summary.dataset.refunded = '0';
    summary.dataset.captured = '0';
    summary.dataset.voided = '0';
    return;
  }
  const n = ledger.succeeded;
  const refunds = ledger.refunds;
  summary.dataset.succeeded = String(n);
  summary.dataset.refunded = String(refunds.filter((r) => r.status === 'succeeded').length);
  summary.dataset.captured = String(ledger.captures.filter((c) => c.status === 'succeeded').length);
  summary.dataset.voided = String(ledger.voids.length);
  const held = captureClause(ledger);
  const also = held + refundClause(ledger);
  const verb = held ? 'authorized' : 'charged';
  summary.textContent =
    n === 0 ? nothingMoved(ledger) : n === 1 ? `The card was ${verb} once${also}.` : `The card was ${verb} ${n} times for one order${also}.`;
  summary.classList.add(n > 1 ? 'is-alarm' : n === 1 ? 'is-ok' : 'is-neutral');
  const of = (charge: string) => h('span', { class: 'ledger-key' }, 'of ', h('code', {}, charge));
  el.ledger.replaceChildren(
    ...ledger.charges.map((c) => {
      const now = standing(c);
      return h(
        'li',
        { 'data-testid': 'provider-charge', 'data-status': c.status },
        h('code', {}, c.id),
        h('span', { class: `pill pill-${now.pill}` }, now.label),
        h('span', { class: 'ledger-amount' }, money(c.amount, c.currency)),
        h('span', { class: 'ledger-key' }, 'key ', h('code', { title: c.metadata.client_idempotency_key ?? '' }, shortKey(c.metadata.client_idempotency_key ?? ''))),
      );
    }),
    ...ledger.captures.map((c) =>
      h(
        'li',
        { class: 'ledger-refund', 'data-testid': 'provider-capture', 'data-status': c.status },
        h('code', {}, c.id),
        h('span', { class: `pill pill-${c.status === 'succeeded' ? 'succeeded' : 'failed'}` }, c.status),
        h('span', { class: 'ledger-amount' }, `capture ${money(c.amount, c.currency)}`),
        of(c.charge),
      ),
    ),
    ...ledger.voids.map((v) =>
      h('li', { class: 'ledger-refund', 'data-testid': 'provider-void' }, h('code', {}, v.id), h('span', { class: 'pill pill-succeeded' }, 'voided'), h('span', { class: 'ledger-amount' }, 'void'), of(v.charge)),
    ),
    ...refunds.map((r) =>
      h(
        'li',
        { class: 'ledger-refund', 'data-testid': 'provider-refund', 'data-status': r.status },
        h('code', {}, r.id),
        h('span', { class: `pill pill-${refundPillOf[r.status]}` }, r.status),
        h('span', { class: 'ledger-amount' }, `refund ${money(r.amount, r.currency)}`),
        of(r.charge),
      ),
    ),
  );
}

/** Draws an act's button. */
function paintButton(b: HTMLButtonElement, v: ButtonView): void {
  b.hidden = v.hidden;
  b.disabled = v.disabled;
  b.setAttribute('aria-busy', String(v.busy));
  if (b.textContent !== v.label) b.textContent = v.label;
}

/** Draws an act's note. */
function paintNote(p: HTMLParagraphElement, note: ActNote | null): void {
  p.className = `act-note is-${note?.tone ?? 'neutral'}`;
  if (p.textContent !== (note?.text ?? '')) p.textContent = note?.text ?? '';
}

/** Draws the refund under the ledger: the button and its note. */
export function paintRefund(el: Elements, s: RefundState): void {
  el.refundBox.hidden = s.target === null;
  el.refundBox.dataset.state = s.phase.kind;
  paintButton(el.refund, refundButtonView(s));
  paintNote(el.refundNote, refundNote(s));
}

/** Draws the order of an authorization under the ledger: Ship order, Cancel order, and their note. */
export function paintOrder(el: Elements, s: OrderState): void {
  el.orderBox.hidden = s.target === null;
  el.orderBox.dataset.ship = s.ship.kind;
  el.orderBox.dataset.cancel = s.cancel.kind;
  paintButton(el.ship, shipButtonView(s));
  paintButton(el.cancel, cancelButtonView(s));
  paintNote(el.orderNote, orderNote(s));
}
