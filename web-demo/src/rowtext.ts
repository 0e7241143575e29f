// What a row of the request timeline says, and its colour: a request, the
// live status subscription (liverow.ts), or a step to the bank and back.
// Plain data, computed without a DOM, that render.ts paints.
import { retryableCodes } from '@chargeonce/client';
import { liveOperation } from './liverow';
import { redirectStep, returnStep, type RequestRecord } from './timeline';

export const shortKey = (k: string) => (k.length > 13 ? `${k.slice(0, 8)}…${k.slice(-4)}` : k);

/** What a timeline row says about a live status subscription: which path the page took. */
function describeLive(r: RequestRecord): { text: string; tone: 'pending' | 'warn' | 'error' | 'ok' } {
  const tone = r.status === 'FAILED' ? 'error' : r.status === 'SUCCEEDED' ? 'ok' : 'pending';
  switch (r.outcome) {
    case 'pending':
      return r.detail === 'subscribed'
        ? { text: `live status: subscribed · ${r.status ?? ''}`.trim(), tone: 'pending' }
        : { text: 'live status: connecting…', tone: 'pending' };
    case 'answered':
      return { text: `live status: subscribed · ${r.status}${r.replayed ? ' · replayed: true' : ''}`, tone };
    case 'closed':
      return { text: `live status: subscribed${r.status ? ` · ${r.status}` : ''} · closed, the outcome came first by another request`, tone: 'ok' };
    case 'abandoned':
      return { text: `live status: ended, ${r.detail ?? 'abandoned'}`, tone: 'warn' };
    default:
      return { text: `live status unavailable: polling${r.detail ? ` (${r.detail})` : ''}`, tone: 'warn' };
  }
}

/** What a timeline row says about a step to the bank or back (not a request). */
function describeStep(r: RequestRecord): { text: string; tone: 'pending' | 'warn' | 'error' | 'ok' } {
  if (r.operation === redirectStep) {
    return { text: "to the bank's challenge page (nextAction REDIRECT); the attempt stays in this tab's storage", tone: 'pending' };
  }
  return r.detail === 'address'
    ? { text: "back from the bank: this tab's storage lost the attempt; its key from chargeonce_key, only asked about", tone: 'warn' }
    : { text: "back from the bank (chargeonce_key): the attempt from this tab's storage, its key and card", tone: 'pending' };
}

/** What a timeline row says about a request, and its colour. */
export function describeRequest(r: RequestRecord): { text: string; tone: 'pending' | 'warn' | 'error' | 'ok' } {
  if (r.operation === liveOperation) return describeLive(r);
  if (r.operation === redirectStep || r.operation === returnStep) return describeStep(r);
  switch (r.outcome) {
    case 'unavailable':
    case 'closed':
    case 'navigated':
    case 'returned':
      return { text: r.outcome, tone: 'warn' }; // a subscription's or a step's outcomes only
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
        tone: r.detail !== undefined && retryableCodes.has(r.detail) ? 'warn' : 'error',
      };
    case 'answered':
      if (r.status === null) return { text: 'unknown key: the server has no attempt with it (yet)', tone: 'warn' };
      if (r.nextAction) return { text: `${r.status} · nextAction ${r.nextAction}: the bank asks the shopper to authenticate`, tone: 'pending' };
      return {
        text: `${r.status}${r.replayed ? ' · replayed: true' : ''}`,
        tone: r.status === 'FAILED' ? 'error' : r.status === 'SUCCEEDED' ? 'ok' : 'pending',
      };
  }
}
