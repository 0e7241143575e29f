// What the page shows and says for a checkout state: plain data, computed
// without a DOM, that render.ts paints (the timeline's rows say theirs in
// rowtext.ts). Unit-tested in view.test.ts.
import { nothingRanCodes, type CaptureMethod, type Charge, type NextAction, type Outcome } from '@chargeonce/client';
import { attemptOf, canPay, demoRetry, isBack, isBusy, isOpen, sessionEnded, sessionEndedCodes, shownOf, type CheckoutState, type Shown } from './checkout-state';
import type { Ledger } from './ledger';
import { orderCharge, type OrderState } from './order';
import { captureFacts, orderAnnouncement, orderLine, orderTitle } from './order-view';
import type { RefundState } from './refund';
import { refundAnnouncement } from './refund-view';
import { cart, money } from './shop';

/** What the page knows besides the state: the switches, the ledger, the timeline. */
export interface RenderContext {
  /** Unsafe mode: a retry carries a new key. */
  unsafe: boolean;
  /** The provider's charges for the attempt's keys, once read. */
  ledger: Ledger | null;
  /** How many idempotency keys this attempt sent (more than one only in unsafe mode). */
  keysSent: number;
  /** Whether a response of this attempt was lost, or abandoned by a reload. */
  responseLost: boolean;
  /** The refund of the charge, once the page offers one (refund.ts). */
  refund?: RefundState;
  /** The order of a charge that only authorized: shipped or cancelled by the shop (order.ts). */
  order?: OrderState;
  /** How the cart's checkout session takes the money, once the shop gave one (fixed from then on); null before. */
  captureMethod?: CaptureMethod | null;
}

export interface PayButtonView {
  label: string;
  disabled: boolean;
  busy: boolean;
  hidden: boolean;
}

export function payButtonView(s: CheckoutState): PayButtonView {
  const total = money(cart.amount, cart.currency);
  const shown = shownOf(s);
  // Nothing to pay: the attempt is over, or its checkout session is; or the bank asks first (Authenticate stands in for Pay).
  const over = shown.kind === 'final' || shown.kind === 'action' || sessionEnded(s);
  const busy = isBusy(s);
  return {
    hidden: over,
    busy,
    disabled: !canPay(s),
    label: busy ? (shown.kind === 'processing' ? 'Processing…' : 'Paying…') : isOpen(s) ? `Pay ${total} (same attempt)` : `Pay ${total}`,
  };
}

export interface AuthenticateButtonView {
  hidden: boolean;
  disabled: boolean;
  busy: boolean;
  label: string;
}

/**
 * The Authenticate button: shown while the bank asks the shopper to
 * authenticate. The page goes to the bank when the shopper presses it, not
 * by itself: leaving the shop for another site is a change of context the
 * shopper should ask for (and read about first).
 */
export function authenticateButtonView(s: CheckoutState): AuthenticateButtonView {
  if (shownOf(s).kind !== 'action') return { hidden: true, disabled: true, busy: false, label: 'Authenticate' };
  if (s.page.leaving) return { hidden: false, disabled: true, busy: true, label: 'Going to your bank…' };
  return { hidden: false, disabled: false, busy: false, label: isBack(s) ? 'Authenticate again' : 'Authenticate' };
}

/**
 * The capture-later choice: the shopper's until the cart's session fixes
 * it, then the session's, locked (the session is keyed on the cart and
 * what it pays); locked too while the page waits. checked null: as the
 * shopper left it.
 */
export function captureChoiceView(s: CheckoutState, ctx: Pick<RenderContext, 'captureMethod'>): { checked: boolean | null; disabled: boolean } {
  if (ctx.captureMethod) return { checked: ctx.captureMethod === 'MANUAL', disabled: true };
  return { checked: null, disabled: attemptOf(s) !== null || isBusy(s) };
}

/** The note under the cards while an attempt is open, or null. */
export function lockedNote(s: CheckoutState, ctx: Pick<RenderContext, 'unsafe'>): string | null {
  if (!isOpen(s)) return null;
  return ctx.unsafe
    ? 'This attempt is not finished: its card and amount stay as they were sent. Unsafe mode gives each retry a new key, so a retry can charge again.'
    : 'This attempt is not finished: its card and amount stay as they were sent, under the same key.';
}

/** The label of the button that starts the next attempt, or null while there is none to start. */
export function newAttemptLabel(s: CheckoutState): string | null {
  if (sessionEnded(s)) return 'Start a new checkout';
  const shown = shownOf(s);
  if (shown.kind !== 'final') return null;
  return shown.c.outcome.status === 'FAILED' ? 'Try another card' : 'Start a new checkout';
}

/** Why a checkout session can no longer be paid, by the code chargeonce refused the attempt with. */
const sessionEndedText: Record<string, { title: string; line: string }> = {
  CHECKOUT_SESSION_PAID: {
    title: 'This order is already paid',
    line: 'Its checkout session is paid, or being paid, under another key. This attempt charged nothing.',
  },
  CHECKOUT_SESSION_EXPIRED: {
    title: 'This checkout expired',
    line: 'Its checkout session expired before it was paid. Nothing was charged.',
  },
  CHECKOUT_SESSION_LOCKED: {
    title: 'Too many attempts',
    line: 'Its checkout session took as many attempts as it allows. Nothing was charged by this one.',
  },
};

export type Tone = 'pending' | 'success' | 'warning' | 'error' | 'alarm';

/** A piece of text; a span when it has a test id or a class, code when code is set. */
export type Inline = string | { text: string; testid?: string; className?: string; code?: boolean };

export interface Line {
  parts: Inline[];
  className?: string;
  testid?: string;
}

export interface Fact {
  term: string;
  value: string;
  testid?: string;
  wide?: boolean;
}

export interface OutcomeView {
  tone: Tone;
  /** The status pill beside the title. */
  pill: 'SUCCEEDED' | 'FAILED' | 'PROCESSING' | null;
  /** The outcome's heading, which gets the focus when a result arrives. */
  title: string;
  spinner: boolean;
  lines: Line[];
  facts: Fact[];
}

const secondsText = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;

/** The countdown to the next question: whole seconds, rounded up. */
export const countdownText = (ms: number) => `${Math.max(1, Math.ceil(ms / 1000))} s`;

/** How many times the provider charged for this attempt, when more than once. */
function chargedTimes(ctx: RenderContext): number {
  return ctx.ledger && ctx.ledger.succeeded > 1 ? ctx.ledger.succeeded : 0;
}

/** What the page says of a retry: its cause ('network', or the error's code), and the wait before it when the retry is still ahead. */
function retryingLine(cause: string, waitMs: number | null, unsafe: boolean): { title: string; line: string } {
  const how = unsafe ? 'Retrying with a NEW key (unsafe mode)…' : 'Retrying automatically with the same key…';
  if (cause === 'network') return { title: 'The response was lost', line: how };
  const asked = waitMs ? `; the next try goes in ${secondsText(waitMs)}` : '';
  const busy = cause !== 'INTERNAL_SERVER_ERROR';
  return { title: busy ? 'The payment service is busy' : 'The server had a problem', line: `It answered ${cause}${asked}. ${how}` };
}

/** How the page follows a PROCESSING attempt: its live status, or the countdown to the next question. */
function liveLine(c: Extract<Shown, { kind: 'processing' }>['c'] & { kind: 'following' }, remainingMs: number): Line {
  if (c.live !== 'poll') {
    return c.liveOpen
      ? { parts: ['Live status: the server tells this page the moment the payment is final.'], className: 'live-line', testid: 'live-status' }
      : { parts: ['Connecting to the live status of this payment…'], className: 'live-line', testid: 'live-status' };
  }
  const unavailable = c.liveFailed ? 'Live status unavailable. ' : '';
  return {
    parts:
      c.retryInMs === 0
        ? [`${unavailable}Checking now…`]
        : [`${unavailable}Checking again in `, { text: countdownText(remainingMs), testid: 'next-poll', className: 'countdown' }, '.'],
    className: 'countdown-line',
  };
}

/** What the outcome box shows for s, or null when it shows nothing. */
export function outcomeView(s: CheckoutState, ctx: RenderContext): OutcomeView | null {
  const p = shownOf(s);
  switch (p.kind) {
    case 'idle':
      return null;
    case 'resuming':
      if (p.back) {
        const lines: Line[] = [{ parts: ['The page asks chargeonce how the payment ended, with its key: a read, which never charges again.'] }];
        return { tone: 'pending', pill: null, title: 'Back from your bank: reading the outcome…', spinner: true, lines, facts: [] };
      }
      return { tone: 'pending', pill: null, title: 'Picking up your payment where it was…', spinner: true, lines: [], facts: [] };
    case 'action':
      return actionView(s, p.nextAction);
    case 'paying': {
      if (!p.c?.cause) return { tone: 'pending', pill: null, title: 'Contacting your bank…', spinner: true, lines: [], facts: [] };
      const r = retryingLine(p.c.cause, p.c.kind === 'retrying' ? p.c.retryInMs : null, ctx.unsafe);
      return { tone: 'pending', pill: null, title: r.title, spinner: true, lines: [{ parts: [r.line] }], facts: [] };
    }
    case 'processing': {
      const c = p.c;
      const lines: Line[] = [
        {
          parts: [
            c.kind === 'sending'
              ? 'Your bank has not confirmed the payment yet: the request is still open, and the server says PROCESSING for its key.'
              : c.checks < 3
                ? 'Your bank has not confirmed the payment yet.'
                : 'Still waiting for the card provider to confirm. The attempt stays open under its key.',
          ],
        },
        c.kind === 'sending'
          ? { parts: ['The page asks chargeStatus about its key meanwhile: a read, which never charges.'], className: 'countdown-line' }
          : liveLine(c, s.page.remainingMs),
      ];
      return { tone: 'pending', pill: 'PROCESSING', title: 'Payment processing', spinner: true, lines, facts: [] };
    }
    case 'unknown': {
      const tries = demoRetry.maxAttempts;
      const code = p.c.error?.code ?? null;
      const busy = code !== null && nothingRanCodes.has(code);
      const again = ctx.unsafe
        ? "Pay sends this attempt's key again, but unsafe mode gives each retry a new key, and a new key can charge again."
        : 'it sends the same key, so it cannot charge twice.';
      const lines: Line[] = [
        {
          parts: [
            !code
              ? `No answer after ${tries} tries. Your card may or may not have been charged. `
              : busy
                ? `It answered ${code} to the last of ${tries} tries, and ran nothing then. `
                : `It answered ${code} to the last of ${tries} tries. Your card may or may not have been charged. `,
            ctx.unsafe ? '' : busy ? 'Pay again in a moment: ' : 'Pay again: ',
            again,
          ],
        },
      ];
      if (code) lines.push({ parts: [code], className: 'code' });
      return {
        tone: 'warning',
        pill: null,
        title: !code ? 'We could not reach the server' : busy ? 'The payment service is busy' : 'The server had a problem',
        spinner: false,
        lines,
        facts: [],
      };
    }
    case 'refused': {
      const { code, message } = p.c.error;
      const ended = sessionEndedCodes.has(code) ? sessionEndedText[code] : undefined;
      if (ended) {
        const lines: Line[] = [
          { parts: [ended.line] },
          { parts: ['Start a new checkout: the shop creates a new checkout session for it.'] },
          { parts: [code], className: 'code' },
        ];
        return { tone: 'error', pill: null, title: ended.title, spinner: false, lines, facts: [] };
      }
      const lines: Line[] = [{ parts: [message] }, { parts: [code], className: 'code' }];
      return { tone: 'error', pill: null, title: 'The payment was refused', spinner: false, lines, facts: [] };
    }
    case 'noSession': {
      const lines: Line[] = [
        { parts: [p.code ? p.message : `No answer from the shop: ${p.message}`] },
        { parts: ['Nothing was charged. Pay asks the shop again, for the same cart.'] },
      ];
      if (p.code) lines.push({ parts: [p.code], className: 'code' });
      return { tone: 'warning', pill: null, title: 'The shop could not start the payment', spinner: false, lines, facts: [] };
    }
    case 'paused': {
      const offline = pausedBy(p.c) === 'offline';
      return {
        tone: 'pending',
        pill: null,
        title: offline ? 'Waiting for the network' : 'Waiting for this tab',
        spinner: true,
        lines: [
          {
            parts: [
              offline
                ? 'This device is offline. The attempt waits under its key, and goes on as soon as the network is back.'
                : 'The tab is hidden. The attempt waits under its key, and goes on as soon as you come back.',
            ],
          },
        ],
        facts: [],
      };
    }
    case 'final':
      return finalView(p.c.outcome, ctx);
  }
}

/** What paused the attempt, as the page says it: the network, or this tab (hidden, and online, and leading its attempt). */
const pausedBy = (c: { flags: { offline: boolean; hidden: boolean; follower: boolean } }): 'offline' | 'hidden' =>
  c.flags.hidden && !c.flags.offline && !c.flags.follower ? 'hidden' : 'offline';

/** The bank's deadline, as the shopper's clock shows it. */
export const deadlineText = (iso: string) => new Date(iso).toLocaleTimeString('en-US', { hour: 'numeric', minute: '2-digit' });

/** The bank asks the shopper to authenticate: what to do, and that nothing is charged until then, nor twice after. */
function actionView(s: CheckoutState, nextAction: NextAction): OutcomeView {
  const total = money(cart.amount, cart.currency);
  if (s.page.leaving) {
    return {
      tone: 'pending',
      pill: 'PROCESSING',
      title: 'Going to your bank…',
      spinner: true,
      lines: [{ parts: ["The attempt is in this tab's storage with its key: the page you come back to picks it up."] }],
      facts: [],
    };
  }
  const deadline = (before: string): Line => ({
    parts: [before, 'Authenticate before ', { text: deadlineText(nextAction.expiresAt), testid: 'action-expires' }, ', or the payment is cancelled.'],
  });
  if (isBack(s)) {
    return {
      tone: 'pending',
      pill: 'PROCESSING',
      title: 'Back from your bank: waiting for its answer',
      spinner: true,
      lines: [
        { parts: ['chargeonce has not heard from your bank yet. The page asks again with the same key: a read, which never charges.'] },
        deadline('If you did not finish at your bank, Authenticate again takes you back there. '),
      ],
      facts: [],
    };
  }
  const c = s.charger;
  const follow: Line =
    c.kind === 'following' && c.live !== 'poll' && c.liveOpen
      ? { parts: ["Live status: if you authenticate elsewhere (your bank's app), this page hears it at once."], className: 'live-line', testid: 'live-status' }
      : { parts: ['Meanwhile the page follows the attempt by its key: reads, which never charge.'], className: 'countdown-line' };
  return {
    tone: 'pending',
    pill: 'PROCESSING',
    title: 'Confirm the payment with your bank',
    spinner: false,
    lines: [
      { parts: [`Your bank asks you to authenticate this payment of ${total} (3-D Secure). Authenticate takes you to its page, which sends you back here.`] },
      deadline('Nothing is charged until you do, and never twice: the attempt waits under its key, and coming back only reads how it ended. '),
      follow,
    ],
    facts: [],
  };
}

/** The title of a FAILED outcome: a decline, or an authentication that did not happen. */
const failedTitles: Record<string, string> = {
  authentication_failed: 'Authentication failed',
  authentication_abandoned: 'Payment cancelled: not authenticated in time',
  authentication_required: 'Your bank asks for authentication',
};

/**
 * The charge of a checkout that only authorized (captureMethod MANUAL), as
 * it stands now: the order's newest word of it, else the outcome's; null
 * for a charge that took the money at once.
 */
function heldCharge(o: Outcome, ctx: Pick<RenderContext, 'order'>): Charge | null {
  const c = o.status === 'SUCCEEDED' ? o.charge : null;
  if (!c || c.captureStatus === 'CAPTURED') return null;
  const now = ctx.order ? orderCharge(ctx.order) : null;
  return now?.id === c.id ? now : c;
}

function finalView(o: Outcome, ctx: RenderContext): OutcomeView {
  const facts: Fact[] = [
    { term: 'status', value: o.status, testid: 'result-status' },
    { term: 'replayed', value: String(o.replayed), testid: 'replayed' },
  ];
  if (o.status === 'FAILED') facts.push({ term: 'failure code', value: o.failure.code });
  else facts.push({ term: 'provider charge', value: o.charge.providerChargeId, wide: true });
  const lines: Line[] = [];
  if (o.replayed) {
    lines.push({
      className: 'note',
      parts: [
        ctx.responseLost
          ? 'replayed: true means this is the stored result of the first request, whose answer was lost: the retry did not charge the card again.'
          : 'replayed: true means this is the stored result of an earlier request with the same key.',
      ],
    });
  }
  if (o.status === 'FAILED') {
    return {
      tone: 'error',
      pill: 'FAILED',
      title: failedTitles[o.failure.code] ?? 'Payment declined',
      spinner: false,
      lines: [
        { parts: [o.failure.message], className: 'reason', testid: 'failure-reason' },
        { parts: ['Nothing was charged. Try another card: it starts a new attempt, with a new key.'] },
        ...lines,
      ],
      facts,
    };
  }
  const amount = money(o.charge.amount, o.charge.currency);
  const times = chargedTimes(ctx);
  const held = heldCharge(o, ctx);
  if (times > 1) {
    // Unsafe mode did what it does: the stark, honest state is red.
    return {
      tone: 'alarm',
      pill: 'SUCCEEDED',
      title: `Charged ${times} times for one order`,
      spinner: false,
      lines: [
        {
          parts: [`The card was charged ${times} times for one order. That is what a new key per retry does.`],
          className: 'alarm',
          testid: 'charged-twice',
        },
        {
          parts: [
            `chargeonce answered SUCCEEDED to a retry that carried a new key, on a new checkout session: to chargeonce, a new payment. The shopper paid ${money(
              o.charge.amount * times,
              o.charge.currency,
            )} for a ${amount} order.`,
          ],
        },
        ...lines,
      ],
      facts,
    };
  }
  if (held) {
    // Authorized only: the money is the shop's once it ships. Where it stands now, after Ship order or Cancel order.
    return {
      tone: held.captureStatus === 'EXPIRED' ? 'warning' : 'success',
      pill: 'SUCCEEDED',
      title: orderTitle(held),
      spinner: false,
      lines: [{ parts: [orderLine(held)], testid: 'order-line' }, ...lines],
      facts: [...facts, ...captureFacts(held)],
    };
  }
  if (ctx.keysSent > 1 && !ctx.ledger) {
    return {
      tone: 'warning',
      pill: 'SUCCEEDED',
      title: `Paid ${amount}, under a new key`,
      spinner: false,
      lines: [{ parts: ["A retry carried a new key, so the card may have been charged more than once. Reading the provider's ledger…"] }, ...lines],
      facts,
    };
  }
  return { tone: 'success', pill: 'SUCCEEDED', title: `Payment received: ${amount}`, spinner: false, lines, facts };
}

/**
 * The live region's text for s: short, one sentence, and the same for as
 * long as the state means the same (a countdown tick is not news).
 */
export function announcement(s: CheckoutState, ctx: RenderContext): string {
  const p = shownOf(s);
  switch (p.kind) {
    case 'idle':
      return '';
    case 'resuming':
      return p.back ? 'Back from your bank. Reading the outcome.' : 'Picking up your payment.';
    case 'action':
      if (s.page.leaving) return 'Going to your bank.';
      return isBack(s) ? 'Back from your bank. Waiting for its answer.' : 'Your bank asks you to authenticate this payment.';
    case 'paying':
      if (!p.c?.cause) return 'Paying.';
      return `${p.c.cause === 'network' ? 'The response was lost' : 'The server is busy'}. Retrying with ${ctx.unsafe ? 'a new key' : 'the same key'}.`;
    case 'processing':
      return 'Payment processing.';
    case 'unknown':
      return ctx.unsafe ? 'Payment not confirmed.' : 'Payment not confirmed. Pay again sends the same key.';
    case 'refused':
      return `Payment refused: ${p.c.error.code}.`;
    case 'noSession':
      return 'The shop could not start the payment. Nothing was charged.';
    case 'paused':
      return pausedBy(p.c) === 'offline' ? 'Offline: the payment waits for the network.' : 'The payment waits for this tab.';
    case 'final': {
      const o = p.c.outcome;
      if (o.status === 'FAILED') return `${failedTitles[o.failure.code] ?? 'Payment declined'}: ${o.failure.message}`;
      // Once a refund, or the order's shipping, is asked for, it is the news: one live region says one thing at a time.
      const refund = ctx.refund ? refundAnnouncement(ctx.refund) : null;
      if (refund) return refund;
      const order = ctx.order ? orderAnnouncement(ctx.order) : null;
      if (order) return order;
      const times = chargedTimes(ctx);
      if (times > 1) return `Payment received, but the card was charged ${times} times.`;
      return heldCharge(o, ctx) ? 'Payment authorized.' : 'Payment received.';
    }
  }
}
