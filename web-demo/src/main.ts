// The demo checkout page: wires the key lifecycle (attempt.ts), the GraphQL
// client with its retry policy (client.ts, retry.ts), the request timeline
// and the provider's ledger to the DOM of index.html.
import './style.css';
import type { CombinedError } from '@urql/core';
import { AttemptStore, type Attempt } from './attempt';
import { createClient } from './client';
import {
  ChargeCardDocument,
  ChargeStatusDocument,
  type ChargeCardInput,
  type ChargeResultFragment,
} from './generated/graphql';
import { fetchLedger, type Ledger } from './ledger';
import { isRetryable, isRetryableCode, pollDelayMs, retryPolicy } from './retry';
import { Timeline } from './timeline';
import { dropResponse, type RequestRecord } from './transport';

const apiKey = import.meta.env.VITE_DEMO_API_KEY ?? 'demo-key';
const merchant = import.meta.env.VITE_DEMO_MERCHANT ?? 'demo';

const cart = { amount: 11300, currency: 'USD', description: 'Trailhead Supply: trail running shoes, merino socks' };

interface Card {
  token: string;
  brand: string;
  /** The short brand mark on the card icon. */
  mark: string;
  last4: string;
  behaviour: string;
}

const cards: Card[] = [
  { token: 'pm_card_visa', brand: 'Visa', mark: 'VISA', last4: '4242', behaviour: 'Succeeds' },
  { token: 'pm_card_chargeDeclined', brand: 'Visa', mark: 'VISA', last4: '0002', behaviour: 'Declined by the bank' },
  { token: 'pm_card_insufficientFunds', brand: 'Mastercard', mark: 'MC', last4: '9995', behaviour: 'Insufficient funds' },
  { token: 'pm_card_slow', brand: 'Mastercard', mark: 'MC', last4: '3220', behaviour: 'Slow bank: processing for a few seconds' },
  { token: 'pm_card_lostResponse', brand: 'Amex', mark: 'AMEX', last4: '0005', behaviour: 'The provider loses its answer' },
];

const money = (amount: number, currency: string) =>
  new Intl.NumberFormat('en-US', { style: 'currency', currency }).format(amount / 100);

function el<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`#${id} is missing from index.html`);
  return e as T;
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

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;

const shortKey = (k: string) => (k.length > 13 ? `${k.slice(0, 8)}…${k.slice(-4)}` : k);

// ---- state -----------------------------------------------------------------

type View =
  | { kind: 'ready'; note?: string }
  | { kind: 'paying'; retrying?: string } // why the client sends the request again
  | { kind: 'resuming' }
  | { kind: 'processing'; polls: number; nextPollMs: number }
  | { kind: 'unknown'; code?: string } // every try failed: no answer, or a retryable error
  | { kind: 'final'; payload: ChargeResultFragment }
  | { kind: 'error'; message: string; code?: string };

const store = new AttemptStore(sessionStorage);
const timeline = new Timeline(sessionStorage);
let view: View = { kind: 'ready' };
let ledger: Ledger | null = null;
/** Bumped when a new attempt starts, so that work for the old one stops. */
let generation = 0;

const dropNext = el<HTMLInputElement>('drop-next');
const unsafe = el<HTMLInputElement>('unsafe');

const client = createClient({
  apiKey,
  unsafe: () => unsafe.checked,
  mintKey: () => crypto.randomUUID(),
  hooks: {
    faultFor(operation) {
      if (operation !== 'ChargeCard' || !dropNext.checked) return null;
      dropNext.checked = false; // one response only
      return dropResponse;
    },
    sent(r) {
      const rec = timeline.add(r);
      renderTimeline();
      return rec;
    },
    update(r) {
      timeline.update(r);
      renderTimeline();
      const why = retryReason(r);
      if (why && view.kind === 'paying') setView({ kind: 'paying', retrying: why });
      if (r.outcome !== 'pending') void refreshLedger();
    },
  },
});

// ---- flow ------------------------------------------------------------------

function chosenInput(): ChargeCardInput {
  const picked = document.querySelector<HTMLInputElement>('input[name="card"]:checked');
  return {
    amount: cart.amount,
    currency: cart.currency,
    paymentMethod: picked?.value ?? cards[0].token,
    description: cart.description,
  };
}

let paying = false;

async function pay(): Promise<void> {
  // A second click while a request is in flight does nothing; were it sent,
  // it would carry the same key and be answered PROCESSING or replayed.
  if (paying || view.kind === 'processing' || view.kind === 'resuming') return;
  const current = store.current();
  if (current && current.state !== 'open') return;
  const attempt = store.begin(chosenInput());
  if (!current) timeline.load(attempt.key);
  paying = true;
  const gen = generation;
  renderAttempt(attempt);
  setView({ kind: 'paying' });
  try {
    const res = await client
      .mutation(ChargeCardDocument, { idempotencyKey: attempt.key, input: attempt.input })
      .toPromise();
    if (gen !== generation) return;
    await handleAnswer(attempt, res.data?.chargeCard, res.error, gen);
  } finally {
    if (gen === generation) {
      paying = false;
      renderControls(); // the view was drawn while paying: Pay is usable again
    }
  }
}

async function handleAnswer(
  attempt: Attempt,
  payload: ChargeResultFragment | null | undefined,
  error: CombinedError | undefined,
  gen: number,
): Promise<void> {
  if (error) {
    if (isRetryable(error)) {
      setView({ kind: 'unknown', code: error.graphQLErrors[0]?.extensions?.code as string | undefined });
    } else {
      const first = error.graphQLErrors[0];
      setView({ kind: 'error', message: first?.message ?? error.message, code: first?.extensions?.code as string | undefined });
    }
    return;
  }
  if (!payload) {
    setView({ kind: 'ready', note: 'This attempt has not reached the server yet. Pay sends it, with the same key.' });
    return;
  }
  if (payload.status === 'PROCESSING') {
    await poll(attempt, payload, gen);
    return;
  }
  store.settle(attempt.key, payload.status);
  setView({ kind: 'final', payload });
  void refreshLedger();
}

/**
 * Polls chargeStatus while the attempt is PROCESSING, at the pace the server
 * asks for, until it is final. It polls the key of the answer, which in
 * unsafe mode may be another than the attempt's.
 */
async function poll(attempt: Attempt, answer: ChargeResultFragment, gen: number): Promise<void> {
  let retryAfterMs = answer.retryAfterMs;
  for (let polls = 0; gen === generation; polls++) {
    const delay = pollDelayMs(retryAfterMs, polls);
    setView({ kind: 'processing', polls, nextPollMs: delay });
    await new Promise((r) => setTimeout(r, delay));
    if (gen !== generation) return;
    const res = await client.query(ChargeStatusDocument, { idempotencyKey: answer.idempotencyKey }).toPromise();
    if (gen !== generation) return;
    if (res.error && isRetryable(res.error)) continue; // no answer, or a busy server: keep asking
    const p = res.data?.chargeStatus;
    if (res.error || !p || p.status !== 'PROCESSING') {
      await handleAnswer(attempt, p, res.error, gen);
      return;
    }
    retryAfterMs = p.retryAfterMs;
  }
}

/** After a reload: the open attempt is picked up where it was, by its key. */
async function resume(attempt: Attempt): Promise<void> {
  const gen = generation;
  setView({ kind: 'resuming' });
  const res = await client.query(ChargeStatusDocument, { idempotencyKey: attempt.key }).toPromise();
  if (gen !== generation) return;
  if (attempt.state !== 'open' && !res.error && !res.data?.chargeStatus) {
    newAttempt(); // a finished attempt whose stored result the server has forgotten
    return;
  }
  await handleAnswer(attempt, res.data?.chargeStatus, res.error, gen);
}

function newAttempt(): void {
  if (!store.startNew()) return;
  generation++;
  paying = false;
  timeline.clear();
  ledger = null;
  renderAttempt(null);
  renderTimeline();
  renderLedger();
  setView({ kind: 'ready' });
  document.querySelector<HTMLInputElement>('input[name="card"]:checked')?.focus();
}

let ledgerSeq = 0;
async function refreshLedger(): Promise<void> {
  const seq = ++ledgerSeq;
  const keys = timeline.keys();
  try {
    const l = keys.length ? await fetchLedger(keys, merchant) : null;
    if (seq !== ledgerSeq) return;
    ledger = l;
  } catch {
    if (seq !== ledgerSeq) return;
  }
  renderLedger();
  if (view.kind === 'final') renderOutcome();
}

/** Why the client sends a request again after the answer r, or null. */
function retryReason(r: RequestRecord): string | null {
  if (r.outcome === 'network-error') return 'The response was lost.';
  if (r.outcome !== 'graphql-error' || !isRetryableCode(r.detail)) return null;
  return r.retryAfterMs
    ? `The server answered ${r.detail} and asked to wait ${seconds(r.retryAfterMs)}.`
    : `The server answered ${r.detail}.`;
}

// ---- rendering ---------------------------------------------------------------

function setView(v: View): void {
  view = v;
  renderOutcome();
  renderControls();
}

function renderCards(): void {
  const fs = el<HTMLFieldSetElement>('cards');
  cards.forEach((c, i) => {
    const id = `card-${c.token}`;
    fs.append(
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

function renderControls(): void {
  const attempt = store.current();
  const busy = paying || view.kind === 'processing' || view.kind === 'resuming';
  const finished = attempt !== null && attempt.state !== 'open';
  const payBtn = el<HTMLButtonElement>('pay');
  payBtn.disabled = busy || finished;
  payBtn.setAttribute('aria-busy', String(busy));
  payBtn.textContent = busy
    ? view.kind === 'processing'
      ? 'Processing…'
      : 'Paying…'
    : attempt?.state === 'open'
      ? `Pay ${money(cart.amount, cart.currency)} (same attempt)`
      : `Pay ${money(cart.amount, cart.currency)}`;
  payBtn.hidden = finished;

  // The card of an attempt is fixed until the attempt is over.
  const locked = attempt !== null;
  for (const r of document.querySelectorAll<HTMLInputElement>('input[name="card"]')) {
    r.disabled = locked;
    if (attempt) r.checked = r.value === attempt.input.paymentMethod;
  }
  const note = el<HTMLParagraphElement>('locked-note');
  note.hidden = !(attempt?.state === 'open');
  note.textContent = 'This attempt is not finished: its card and amount stay as they were sent, under the same key.';

  const again = el<HTMLButtonElement>('new-attempt');
  again.hidden = !finished;
  if (finished) {
    again.textContent = attempt.state === 'FAILED' ? 'Try another card' : 'Start a new checkout';
  }
}

function renderAttempt(a: Attempt | null): void {
  const code = el<HTMLElement>('attempt-key');
  code.textContent = a ? a.key : 'none yet: minted when you pay';
  code.classList.toggle('muted', !a);
}

function renderOutcome(): void {
  const out = el<HTMLDivElement>('outcome');
  out.replaceChildren();
  out.className = 'outcome';
  const v = view;
  switch (v.kind) {
    case 'ready':
      if (v.note) out.append(h('p', { class: 'note' }, v.note));
      return;
    case 'resuming':
      out.classList.add('is-pending');
      out.append(spinnerLine('Picking up your payment where it was…'));
      return;
    case 'paying':
      out.classList.add('is-pending');
      out.append(
        spinnerLine(
          v.retrying
            ? unsafe.checked
              ? `${v.retrying} Retrying with a NEW key (unsafe mode)…`
              : `${v.retrying} Retrying automatically with the same key…`
            : 'Contacting your bank…',
        ),
      );
      return;
    case 'processing':
      out.classList.add('is-pending');
      out.append(
        statusHead('PROCESSING', 'Payment processing'),
        h(
          'p',
          {},
          v.polls < 3
            ? 'Your bank has not confirmed the payment yet. This page checks again in '
            : 'Still waiting for the card provider to confirm. The attempt stays open, and paying again could not charge twice. Next check in ',
          h('span', { 'data-testid': 'next-poll' }, seconds(v.nextPollMs)),
          '.',
        ),
      );
      return;
    case 'unknown': {
      out.classList.add('is-warning');
      const tries = retryPolicy.maxNumberAttempts;
      const busy = v.code === 'SERVICE_UNAVAILABLE' || v.code === 'RATE_LIMITED';
      out.append(
        statusHead(null, !v.code ? 'We could not reach the server' : busy ? 'The payment service is busy' : 'The server had a problem'),
        h(
          'p',
          {},
          !v.code
            ? `No answer after ${tries} tries. Your card may or may not have been charged. `
            : busy
              ? `It answered ${v.code} to the last of ${tries} tries, and ran nothing then. `
              : `It answered ${v.code} to the last of ${tries} tries. Your card may or may not have been charged. `,
          busy ? 'Pay again in a moment: ' : 'Pay again: ',
          'it sends the same key, so it cannot charge twice.',
        ),
      );
      if (v.code) out.append(h('p', { class: 'code' }, v.code));
      return;
    }
    case 'error':
      out.classList.add('is-error');
      out.append(statusHead(null, 'The payment was refused'), h('p', {}, v.message));
      if (v.code) out.append(h('p', { class: 'code' }, v.code));
      return;
    case 'final':
      renderFinal(out, v.payload);
      return;
  }
}

function renderFinal(out: HTMLElement, p: ChargeResultFragment): void {
  const lost = timeline.all().some((r) => r.outcome === 'network-error' || r.outcome === 'abandoned');
  if (p.status === 'SUCCEEDED') {
    out.classList.add('is-success');
    out.append(
      statusHead('SUCCEEDED', `Payment received: ${money(p.charge?.amount ?? cart.amount, p.charge?.currency ?? cart.currency)}`),
    );
  } else {
    out.classList.add('is-error');
    out.append(
      statusHead('FAILED', 'Payment declined'),
      h('p', { class: 'reason', 'data-testid': 'failure-reason' }, p.failure?.message ?? 'The card was not charged.'),
      h('p', {}, 'Nothing was charged. Try another card: it starts a new attempt, with a new key.'),
    );
  }
  const facts = h('dl', { class: 'facts' });
  const fact = (k: string, v: Node | string, wide = false) =>
    facts.append(h('div', wide ? { class: 'wide' } : {}, h('dt', {}, k), h('dd', {}, v)));
  fact('status', h('code', { 'data-testid': 'result-status' }, p.status));
  fact('replayed', h('code', { 'data-testid': 'replayed' }, String(p.replayed)));
  if (p.failure) fact('failure code', h('code', {}, p.failure.code));
  if (p.charge) fact('provider charge', h('code', {}, p.charge.providerChargeId), true);
  out.append(facts);
  if (p.replayed) {
    out.append(
      h(
        'p',
        { class: 'note' },
        lost
          ? 'replayed: true means this is the stored result of the first request, whose answer was lost: the retry did not charge the card again.'
          : 'replayed: true means this is the stored result of an earlier request with the same key.',
      ),
    );
  }
  if (ledger && ledger.succeeded > 1) {
    out.append(
      h(
        'p',
        { class: 'alarm', 'data-testid': 'charged-twice' },
        `The card was charged ${ledger.succeeded} times for one order. That is what a new key per retry does.`,
      ),
    );
  }
}

function statusHead(status: string | null, title: string): HTMLElement {
  return h('div', { class: 'status-head' }, status ? h('span', { class: `pill pill-${status.toLowerCase()}` }, status) : null, h('strong', {}, title));
}

function spinnerLine(text: string): HTMLElement {
  return h('p', { class: 'spinner-line' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), text);
}

const operationNames: Record<string, string> = { ChargeCard: 'chargeCard', ChargeStatus: 'chargeStatus' };

function describe(r: RequestRecord): { text: string; tone: string } {
  switch (r.outcome) {
    case 'pending':
      return { text: 'waiting for the answer…', tone: 'pending' };
    case 'abandoned':
      return { text: `no answer read: ${r.detail ?? 'abandoned'}`, tone: 'warn' };
    case 'network-error':
      return {
        text: r.fault ? 'network error: the response was lost after the server acted' : `network error${r.detail ? `: ${r.detail}` : ''}`,
        tone: 'error',
      };
    case 'graphql-error':
      return {
        text: `error ${r.detail ?? ''}${r.retryAfterMs ? `, retry after ${r.retryAfterMs} ms` : ''}`.trim(),
        // A code worth a retry is a busy or failing server, not a refusal.
        tone: isRetryableCode(r.detail) ? 'warn' : 'error',
      };
    case 'answered':
      if (r.status === null) return { text: 'unknown key: the server never got this attempt', tone: 'warn' };
      return { text: `${r.status}${r.replayed ? ' · replayed: true' : ''}`, tone: r.status === 'FAILED' ? 'error' : r.status === 'SUCCEEDED' ? 'ok' : 'pending' };
  }
}

function renderTimeline(): void {
  const ol = el<HTMLOListElement>('timeline');
  const rows = timeline.all();
  if (rows.length === 0) {
    ol.replaceChildren(h('li', { class: 'empty' }, 'No request yet.'));
    return;
  }
  const firstKey = rows[0].idempotencyKey;
  ol.replaceChildren(
    ...rows.map((r) => {
      const d = describe(r);
      return h(
        'li',
        {
          class: `tl tl-${d.tone}`,
          'data-testid': 'request',
          'data-operation': operationNames[r.operation] ?? r.operation,
          'data-outcome': r.outcome,
          'data-key': r.idempotencyKey,
          'data-status': r.status ?? '',
          'data-replayed': r.replayed === undefined ? '' : String(r.replayed),
        },
        h('span', { class: 'tl-n' }, `#${r.n}`),
        h(
          'span',
          { class: 'tl-body' },
          h('span', { class: 'tl-op' }, operationNames[r.operation] ?? r.operation, r.fault ? h('span', { class: 'tag tag-fault' }, 'response dropped') : null),
          h(
            'span',
            { class: 'tl-key' },
            'key ',
            h('code', { title: r.idempotencyKey }, shortKey(r.idempotencyKey)),
            r.idempotencyKey !== firstKey ? h('span', { class: 'tag tag-danger' }, 'new key') : null,
          ),
          h('span', { class: 'tl-result' }, d.text),
        ),
      );
    }),
  );
}

function renderLedger(): void {
  const ul = el<HTMLUListElement>('ledger');
  const summary = el<HTMLParagraphElement>('ledger-summary');
  summary.className = 'ledger-summary';
  if (!ledger || ledger.charges.length === 0) {
    ul.replaceChildren();
    summary.textContent = timeline.keys().length ? 'No charge at the provider for this attempt.' : 'Nothing charged yet.';
    summary.dataset.succeeded = '0';
    return;
  }
  const n = ledger.succeeded;
  summary.dataset.succeeded = String(n);
  summary.textContent =
    n === 0
      ? 'No money moved: the provider declined the charge.'
      : n === 1
        ? 'The card was charged once.'
        : `The card was charged ${n} times for one order.`;
  summary.classList.add(n > 1 ? 'is-alarm' : n === 1 ? 'is-ok' : 'is-neutral');
  ul.replaceChildren(
    ...ledger.charges.map((c) =>
      h(
        'li',
        { 'data-testid': 'provider-charge', 'data-status': c.status },
        h('code', {}, c.id),
        h('span', { class: `pill pill-${c.status === 'succeeded' ? 'succeeded' : 'failed'}` }, c.status),
        h('span', { class: 'ledger-amount' }, money(c.amount, c.currency)),
        h('span', { class: 'ledger-key' }, 'key ', h('code', { title: c.metadata.client_idempotency_key ?? '' }, shortKey(c.metadata.client_idempotency_key ?? ''))),
      ),
    ),
  );
}

// ---- start -----------------------------------------------------------------

renderCards();
el<HTMLFormElement>('pay-form').addEventListener('submit', (e) => {
  e.preventDefault();
  void pay();
});
el<HTMLButtonElement>('new-attempt').addEventListener('click', newAttempt);

const existing = store.current();
if (existing) {
  timeline.load(existing.key);
  renderAttempt(existing);
  renderTimeline();
  void refreshLedger();
  void resume(existing);
} else {
  renderControls();
}
