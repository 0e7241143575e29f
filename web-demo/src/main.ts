// The demo checkout page: wires the checkout (checkout.ts, a view over a
// Charger from @chargeonce/client) to the shop's backend (cart.ts), the
// fault switch's fetch and the request timeline (drawn from the library's
// events), the provider's ledger and the DOM (render.ts). Everything the page holds lives in start()'s closure. The
// page holds no secret key: it pays the checkout session that the shop's
// backend created, with the publishable key and the session's client secret.
// The page is also where the bank sends the shopper back (the session's
// returnUrl): on load it resumes first, then tidies its address. Once the
// charge SUCCEEDED, the shop's backend acts on it: an authorization is
// shipped or cancelled (order.ts), money taken is refunded (refund.ts).
import './style.css';
import { createCharger, returnKeyParam, storageKeyStore, type CaptureMethod, type RunnerEvent } from '@chargeonce/client';
import { actOf } from './backend';
import { actsStoragePrefix } from './desk';
import { requestCheckoutSession, returnCaptureParam, returnCartParam, returnUrlOf } from './cart';
import { attemptOf, Checkout, demoRetry, resultArrived, shownOf, type BankReturn } from './checkout';
import { fetchLedger, type Ledger } from './ledger';
import { liveRows } from './liverow';
import { Order, orderCharge, orderTarget } from './order';
import { orderSettled } from './order-view';
import { RefundDesk, refundTarget } from './refund';
import { refundSettled } from './refund-view';
import { chosenCapture, chosenCard, elements, focusOutcome, paint, paintCards, paintLedger, paintOrder, paintRefund, paintTimeline } from './render';
import { cart } from './shop';
import type { Clock } from './slow';
import { redirectStep, returnStep, Timeline, type RequestRecord } from './timeline';
import { dropResponse, faultFetch } from './transport';
import type { RenderContext } from './view';

const merchant = import.meta.env.VITE_DEMO_MERCHANT ?? 'demo';

function start(doc: Document, win: Window): void {
  const el = elements(doc);
  // The timeline's rows come from what the library tells (timeline.ts); each change is painted, and an answer reads the ledger again.
  const timeline = new Timeline(win.sessionStorage, (r) => {
    paintTimeline(el, timeline.all());
    if (r.outcome !== 'pending') void refreshLedger();
  });
  const endpoint = new URL('/graphql', win.location.href).toString();
  let ledger: Ledger | null = null;
  let ledgerSeq = 0;
  // A request the browser cuts because the page goes away was not lost by the network: nobody reads its answer.
  win.addEventListener('pagehide', () => (timeline.leaving ??= 'the page was reloaded'));
  win.addEventListener('pageshow', (e) => {
    timeline.leaving = null;
    if (e.persisted) checkout.shown(); // back from the back/forward cache: the page did not go to the bank after all
  });
  const rows = { sent: (r: Omit<RequestRecord, 'n'>) => timeline.add(r), update: (r: RequestRecord) => timeline.update(r) };

  // Every request to chargeonce and to the shop's backend goes through it: the switch's fault, and nothing else.
  const faulty = faultFetch(
    {
      faultFor(r) {
        // The answer the switch loses: a charge's, or an act's of the shop's backend (it refunds, captures or voids, then the connection drops).
        if ((r.operation !== 'chargeCard' && !actOf(r.operation)) || !el.dropNext.checked) return null;
        el.dropNext.checked = false; // one response only
        return dropResponse;
      },
      faulted: (r, fault) => timeline.fault(r.operation, r.key, fault),
    },
    (input, init) => win.fetch(input, init),
  );
  const live = liveRows(rows);
  const clock: Clock = { now: () => Date.now(), setTimeout: (fn, ms) => win.setTimeout(fn, ms), clearTimeout: (h) => win.clearTimeout(h as number) };
  // The shop's backend acts with the secret key on the server, each an operation of the library's runner, whose
  // records (the acts' ids) live in sessionStorage; the requests go through the fault's fetch, the rows come from the runner's events.
  const acts = {
    store: storageKeyStore(win.sessionStorage, actsStoragePrefix),
    clock,
    fetch: faulty,
    onEvent: (e: RunnerEvent) => void ((e.type === 'send' || e.type === 'answer') && timeline.told(e)),
  };
  const refunds = new RefundDesk(acts);
  const order = new Order(acts);

  const checkout = new Checkout({
    storage: win.sessionStorage,
    clock,
    // The shop's backend: the cart's checkout session, created with the secret key on the server.
    // returnUrl: this page, so that the bank sends the shopper back to the page that resumes; it names the cart (cart.ts).
    createSession: (cartId, captureMethod) =>
      requestCheckoutSession({
        cartId,
        amount: cart.amount,
        currency: cart.currency,
        description: cart.description,
        returnUrl: returnUrlOf(win.location, cartId, captureMethod),
        ...(captureMethod === 'MANUAL' ? { captureMethod } : {}),
      }),
    charger: (session, onEvent) =>
      createCharger({
        endpoint,
        publishableKey: session.publishableKey,
        session: session.clientSecret,
        storage: 'session',
        live: 'ws',
        retry: demoRetry,
        fetch: faulty,
        onEvent,
      }),
    endpoint: (publishableKey) => ({
      url: endpoint,
      fetch: faulty,
      publishableKey,
      watch(operation, key) {
        const row = timeline.request(operation, key);
        return (e) => timeline.answer(row, e);
      },
    }),
    observer: {
      event(e) {
        // The charger's attempt has its own timeline (a reload finds it again).
        if (e.type === 'send' && timeline.attempt !== e.key) timeline.load(e.key);
        if (e.type === 'send' || e.type === 'answer') timeline.told(e);
        live.event(e);
      },
      state: (next, prev) => live.state(next, prev),
      returned(key, from) {
        if (timeline.attempt !== key) timeline.load(key);
        timeline.add({ operation: returnStep, idempotencyKey: key, sentAt: new Date().toISOString(), outcome: 'returned', detail: from });
      },
    },
  });

  const context = (): RenderContext => ({
    unsafe: el.unsafe.checked,
    ledger,
    keysSent: timeline.keys().length,
    responseLost: timeline.all().some((r) => r.operation === 'chargeCard' && (r.outcome === 'network-error' || r.outcome === 'abandoned')),
    refund: refunds.state,
    order: order.state,
    captureMethod: checkout.captureMethod,
  });

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
    paintLedger(el, ledger, keys.length);
    paint(el, checkout.state, context()); // the final box reads the ledger
  }

  /** Whether the focus is where the shopper left it to wait: on Pay, or nowhere. */
  const focusIsWaiting = () => {
    const a = doc.activeElement;
    return a === null || a === doc.body || a === el.pay || el.outcome.contains(a);
  };

  checkout.subscribe((next, prev) => {
    const attempt = attemptOf(next);
    if (attempt?.key !== attemptOf(prev)?.key) {
      // Another attempt, or none: its own timeline and ledger.
      if (!attempt) timeline.clear();
      else if (timeline.attempt !== attempt.key) timeline.load(attempt.key);
      ledger = null;
      paintTimeline(el, timeline.all());
      void refreshLedger();
    }
    // An authorization may be shipped or cancelled, money taken refunded; what this tab kept of either is picked up.
    order.show(orderTarget(next));
    refunds.show(refundTarget(next, orderCharge(order.state)));
    paint(el, next, context());
    if (shownOf(next).kind === 'final' && shownOf(prev).kind !== 'final') void refreshLedger();
    // A result arrived: its heading takes the focus (Pay may have just been hidden).
    if (resultArrived(prev, next) && focusIsWaiting()) focusOutcome(el);
  });

  refunds.subscribe((next, prev) => {
    paintRefund(el, next);
    paint(el, checkout.state, context()); // the live region says how the refund goes
    // The refund's outcome arrived: its note takes the focus, from the button that is busy or gone.
    const a = doc.activeElement;
    if (refundSettled(prev.phase, next.phase) && (a === null || a === doc.body || a === el.refund)) el.refundNote.focus();
  });
  paintRefund(el, refunds.state);
  el.refund.addEventListener('click', () => refunds.refund());

  order.subscribe((next, prev) => {
    paintOrder(el, next);
    // Shipped: the money taken may be refunded.
    refunds.show(refundTarget(checkout.state, orderCharge(next)));
    paint(el, checkout.state, context()); // the outcome shows where the charge stands now; the live region says how the act goes
    const a = doc.activeElement;
    if (orderSettled(prev, next) && (a === null || a === doc.body || a === el.ship || a === el.cancel)) el.orderNote.focus();
  });
  paintOrder(el, order.state);
  el.ship.addEventListener('click', () => order.ship());
  el.cancel.addEventListener('click', () => order.cancel());

  paintCards(el);
  el.form.addEventListener('submit', (e) => {
    e.preventDefault();
    checkout.pay(chosenCard(el), el.unsafe.checked, chosenCapture(el));
  });
  // The shopper's click takes the page to the bank, not the page by itself: leaving the shop is theirs to ask for.
  el.authenticate.addEventListener('click', () => {
    const s = checkout.state;
    const shown = shownOf(s);
    if (shown.kind !== 'action' || s.page.leaving || !checkout.authenticate()) return;
    // The navigation has begun; what follows runs before the page unloads, and the timeline is in sessionStorage for the return.
    timeline.add({ operation: redirectStep, idempotencyKey: shown.c.attempt.key, sentAt: new Date().toISOString(), outcome: 'navigated', detail: shown.nextAction.url });
    timeline.abandonPending('the page went to the bank');
    paintTimeline(el, timeline.all());
  });
  el.newAttempt.addEventListener('click', () => {
    if (checkout.startNew()) el.cards.querySelector<HTMLInputElement>('input[name="card"]:checked')?.focus();
  });
  // The outcome's words depend on the mode.
  el.unsafe.addEventListener('change', () => paint(el, checkout.state, context()));
  void checkout.start(bankReturn(win.location)).then(() => tidyAddress(win));
}

/** The return from the bank, if this page is one: chargeonce_key in the address, and the cart it names. */
function bankReturn(location: Location): BankReturn | undefined {
  const q = new URLSearchParams(location.search);
  const key = q.get(returnKeyParam);
  const captureMethod: CaptureMethod = q.get(returnCaptureParam) === 'manual' ? 'MANUAL' : 'AUTOMATIC';
  return key ? { key, cartId: q.get(returnCartParam), captureMethod } : undefined;
}

/**
 * Drops the return's parameters from the address once resume() has read
 * them: a reload, a bookmark or a shared link then carries no key. The
 * attempt is in storage by then, or was only ever asked about.
 */
function tidyAddress(win: Window): void {
  const url = new URL(win.location.href);
  if (![returnKeyParam, returnCartParam, returnCaptureParam].some((p) => url.searchParams.has(p))) return;
  url.searchParams.delete(returnKeyParam);
  url.searchParams.delete(returnCartParam);
  url.searchParams.delete(returnCaptureParam);
  win.history.replaceState(win.history.state, '', url);
}

start(document, window);
