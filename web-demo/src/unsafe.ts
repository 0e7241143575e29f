// Unsafe mode: the broken habit the demo shows beside the right one. This
// naive sender takes every retry for a new order: it asks the shop for a
// new checkout session (a new cart) and mints a new idempotency key, so
// chargeonce sees a new payment and charges again. (A new key on the same
// session would be refused with CHECKOUT_SESSION_PAID: the session guard at
// work.) It is used only in unsafe mode, and it is not the library: the
// charger never rotates a key while an outcome is unknown. It tells its
// progress in the library's words (a ChargerState), so that the page draws
// it as it draws the charger's; its attempt keeps the first key, the
// shopper's one payment, while each retry goes under a new one.
import type { Answer, Attempt, ChargeCardInput, ChargePayload, ChargerState, Outcome, ServerError } from '@chargeonce/client';
import { send, type Endpoint } from './request';

export interface NaiveOptions {
  endpoint: Endpoint;
  /** A new cart's checkout session: its client secret, or null when the shop gave none. */
  newSession(): Promise<string | null>;
  mintKey(): string;
  wait(ms: number): Promise<void>;
  now(): number;
  /** Tries in all, as the charger's retry loop in the demo. */
  maxTries: number;
  /** Whether the page still wants the answer. */
  live(): boolean;
}

/** What the naive sender reports as it goes. */
export type NaiveReport = (state: ChargerState) => void;

const flags = { offline: false, hidden: false, follower: false };

/** The wait before a retry: the server's hint, else a fixed 600 ms (the naive sender has no backoff). */
const retryWait = (a: Answer) => (a.kind !== 'payload' && a.hintMs ? a.hintMs : 600);

/**
 * Pays input (with its checkout session) the naive way, from key (or a new
 * one), and resolves with the state it ends in; null when the page no
 * longer wants it.
 */
export async function payNaively(input: ChargeCardInput, o: NaiveOptions, report: NaiveReport, key = o.mintKey()): Promise<ChargerState | null> {
  const first = key;
  let sends = 0;
  const attempt = (): Attempt => ({ key: first, input, sends });
  let current = input;
  let cause: string | undefined;
  const since = o.now();
  for (let tries = 1; ; tries++) {
    sends++;
    report({ kind: 'sending', attempt: { ...attempt(), input }, run: { since, tries }, ...(cause ? { cause } : {}), flags, paused: false });
    const a = await send(o.endpoint, 'chargeCard', { idempotencyKey: key, input: current });
    if (!o.live()) return null;
    if (a.kind === 'payload' && a.payload) {
      if (a.payload.status !== 'PROCESSING') return settled(attempt(), key, a.payload);
      return poll(attempt(), key, current.checkoutSession ?? '', a.payload.retryAfterMs ?? null, o, report);
    }
    const error: ServerError | undefined = a.kind === 'error' ? a.error : undefined;
    if (a.kind === 'error' && !a.retryable) return { kind: 'rejected', attempt: attempt(), error: a.error, flags, paused: false };
    if (tries >= o.maxTries) return { kind: 'unknown', attempt: attempt(), ...(error ? { error } : {}), flags, paused: false };
    cause = error?.code ?? 'network';
    const wait = retryWait(a);
    report({ kind: 'retrying', attempt: { ...attempt(), input }, run: { since, tries }, retryInMs: wait, cause, flags, paused: false });
    // The broken habit: the retry is taken for a new order, with a new cart and a new key.
    const secret = await o.newSession();
    if (secret) current = { ...current, checkoutSession: secret };
    key = o.mintKey();
    await o.wait(wait);
  }
}

/** PROCESSING: asks chargeStatus at the server's pace until a final status. */
async function poll(attempt: Attempt, key: string, session: string, retryAfterMs: number | null, o: NaiveOptions, report: NaiveReport): Promise<ChargerState | null> {
  let pollMs = retryAfterMs && retryAfterMs > 0 ? retryAfterMs : 1_000;
  for (let checks = 0; ; checks++) {
    report({ kind: 'following', attempt, live: 'poll', liveOpen: false, checks, pollMs, retryInMs: pollMs, flags, paused: false });
    await o.wait(pollMs);
    if (!o.live()) return null;
    const a = await send(o.endpoint, 'chargeStatus', { idempotencyKey: key, checkoutSession: session });
    if (!o.live()) return null;
    if (a.kind === 'payload' && a.payload && a.payload.status !== 'PROCESSING') return settled(attempt, key, a.payload);
    if (a.kind === 'payload' && a.payload?.retryAfterMs) pollMs = a.payload.retryAfterMs;
  }
}

/** A final answer, as the charger would settle it. */
function settled(attempt: Attempt, key: string, p: ChargePayload): ChargerState {
  const outcome: Outcome =
    p.status === 'SUCCEEDED'
      ? { status: 'SUCCEEDED', key, charge: p.charge!, replayed: p.replayed }
      : { status: 'FAILED', key, failure: p.failure ?? { code: 'unknown', message: 'failed' }, replayed: p.replayed };
  return { kind: 'settled', attempt, outcome, flags, paused: false };
}
