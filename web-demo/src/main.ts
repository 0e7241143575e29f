// The demo checkout page: wires the checkout state machine (checkout.ts) to
// the shop's backend (cart.ts), the GraphQL client and its retry policy
// (client.ts, retry.ts), the request timeline, the provider's ledger and the
// DOM (render.ts). Everything the page holds lives in start()'s closure. The
// page holds no secret key: it pays the checkout session that the shop's
// backend created, with the publishable key and the session's client secret.
import './style.css';
import type { AnyVariables, OperationResult, OperationResultSource } from '@urql/core';
import { CartStore, mintCartId, requestCheckoutSession } from './cart';
import { Checkout, resultArrived, type Answer, type CheckoutTransport } from './checkout';
import { createClient } from './client';
import { ChargeCardDocument, SessionChargeStatusDocument, type ChargeResultFragment } from './generated/graphql';
import { fetchLedger, type Ledger } from './ledger';
import { createLiveClient, liveStatus, websocketURL } from './live';
import {
  chosenCard,
  elements,
  focusOutcome,
  paint,
  paintCards,
  paintLedger,
  paintTimeline,
} from './render';
import { cart, chargeInput } from './shop';
import { Timeline } from './timeline';
import { dropResponse } from './transport';
import type { RenderContext } from './view';

const merchant = import.meta.env.VITE_DEMO_MERCHANT ?? 'demo';

/**
 * The first result of an urql operation. Aborting the signal tears the
 * operation down (urql aborts its fetch), and the promise never settles.
 */
function firstResult<D, V extends AnyVariables>(
  source: OperationResultSource<OperationResult<D, V>>,
  signal?: AbortSignal,
): Promise<OperationResult<D, V>> {
  return new Promise((resolve) => {
    let done = false;
    const sub = source.subscribe((result) => {
      if (done) return;
      done = true;
      resolve(result);
      queueMicrotask(() => sub.unsubscribe());
    });
    signal?.addEventListener('abort', () => sub.unsubscribe(), { once: true });
  });
}

const answerOf = (r: OperationResult, payload: ChargeResultFragment | null | undefined): Answer => ({ payload, error: r.error });

function start(doc: Document, win: Window): void {
  const el = elements(doc);
  const timeline = new Timeline(win.sessionStorage);
  const carts = new CartStore(win.sessionStorage);
  let ledger: Ledger | null = null;
  let ledgerSeq = 0;

  // The shop's backend: the cart's checkout session, created with the secret key on the server.
  const createSession = (cartId: string) =>
    requestCheckoutSession({ cartId, amount: cart.amount, currency: cart.currency, description: cart.description });
  // The client secret of the session that key was sent on: its requests say (in unsafe mode
  // each retry has its own), else the attempt's.
  const sessionOf = (key: string) =>
    timeline.all().find((r) => r.idempotencyKey === key && r.checkoutSession)?.checkoutSession ??
    checkout.state.attempt?.input.checkoutSession ??
    '';
  const publishableKey = () => carts.publishableKey();

  const client = createClient({
    publishableKey,
    unsafe: () => el.unsafe.checked,
    mintKey: () => crypto.randomUUID(),
    // Unsafe mode: a naive checkout takes a retry for a new order, with a new cart.
    async newSession() {
      const answer = await createSession(mintCartId());
      return 'session' in answer ? answer.session.clientSecret : null;
    },
    hooks: {
      faultFor(operation) {
        if (operation !== 'ChargeCard' || !el.dropNext.checked) return null;
        el.dropNext.checked = false; // one response only
        return dropResponse;
      },
      sent(r) {
        const rec = timeline.add(r);
        paintTimeline(el, timeline.all());
        checkout.observe(rec);
        return rec;
      },
      update(r) {
        timeline.update(r);
        paintTimeline(el, timeline.all());
        checkout.observe(r);
        if (r.outcome !== 'pending') void refreshLedger();
      },
    },
  });

  const timelineHooks = {
    sent(r: Parameters<typeof timeline.add>[0]) {
      const rec = timeline.add(r);
      paintTimeline(el, timeline.all());
      return rec;
    },
    update(r: Parameters<typeof timeline.update>[0]) {
      timeline.update(r);
      paintTimeline(el, timeline.all());
    },
  };
  // Live status: chargeUpdated over a websocket, the publishable key in connection_init.
  const watch = liveStatus(createLiveClient(websocketURL(win.location), publishableKey), timelineHooks, sessionOf);

  const transport: CheckoutTransport = {
    watch,
    createSession,
    async chargeCard(idempotencyKey, input, signal) {
      const r = await firstResult(client.mutation(ChargeCardDocument, { idempotencyKey, input }), signal);
      return answerOf(r, r.data?.chargeCard);
    },
    async chargeStatus(idempotencyKey) {
      const variables = { idempotencyKey, checkoutSession: sessionOf(idempotencyKey) };
      const r = await firstResult(client.query(SessionChargeStatusDocument, variables));
      return answerOf(r, r.data?.chargeStatus);
    },
  };

  const checkout = new Checkout({
    transport,
    clock: { now: () => Date.now(), setTimeout: (fn, ms) => win.setTimeout(fn, ms), clearTimeout: (h) => win.clearTimeout(h as number) },
    storage: win.sessionStorage,
    mintKey: () => crypto.randomUUID(),
  });

  const context = (): RenderContext => ({
    unsafe: el.unsafe.checked,
    ledger,
    keysSent: timeline.keys().length,
    responseLost: timeline.all().some((r) => r.outcome === 'network-error' || r.outcome === 'abandoned'),
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
    if (next.attempt?.key !== prev.attempt?.key) {
      // Another attempt, or none: its own timeline and ledger.
      if (next.attempt) timeline.load(next.attempt.key);
      else timeline.clear();
      ledger = null;
      paintTimeline(el, timeline.all());
      void refreshLedger();
    }
    paint(el, next, context());
    if (next.phase.kind === 'final' && prev.phase.kind !== 'final') void refreshLedger();
    // A result arrived: its heading takes the focus (Pay may have just been hidden).
    if (resultArrived(prev, next) && focusIsWaiting()) focusOutcome(el);
  });

  paintCards(el);
  el.form.addEventListener('submit', (e) => {
    e.preventDefault();
    checkout.pay(chargeInput(chosenCard(el)));
  });
  el.newAttempt.addEventListener('click', () => {
    if (checkout.startNew()) el.cards.querySelector<HTMLInputElement>('input[name="card"]:checked')?.focus();
  });
  // The outcome's words depend on the mode.
  el.unsafe.addEventListener('change', () => paint(el, checkout.state, context()));
  checkout.start();
}

start(document, window);
