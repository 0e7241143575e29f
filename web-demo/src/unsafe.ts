// Unsafe mode: the broken habit the demo shows beside the right one. This
// naive sender takes every retry for a new order: it asks the shop for a
// new checkout session (a new cart) and mints a new idempotency key, so
// chargeonce sees a new payment and charges again. (A new key on the same
// session would be refused with CHECKOUT_SESSION_PAID: the session guard at
// work.) It is used only in unsafe mode, and it is not the library: the
// charger never rotates a key while an outcome is unknown.
import type { ChargeCardInput } from '@chargeonce/client';
import type { Phase, RetryNote } from './checkout';
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

/** What the naive sender reports: the phase, and the key it sends now. */
export type NaiveReport = (phase: Phase, key: string) => void;

/**
 * Pays input (with its checkout session) the naive way, from key (or a new
 * one), and resolves with the phase it ends in.
 */
export async function payNaively(input: ChargeCardInput, o: NaiveOptions, report: NaiveReport, key = o.mintKey()): Promise<Phase> {
  let current = input;
  report({ kind: 'paying', retry: null }, key);
  for (let tries = 1; ; tries++) {
    const a = await send(o.endpoint, 'chargeCard', { idempotencyKey: key, input: current });
    if (!o.live()) return { kind: 'idle' };
    if (a.kind === 'payload' && a.payload) {
      if (a.payload.status !== 'PROCESSING') return { kind: 'final', payload: a.payload };
      return poll(key, current.checkoutSession ?? '', a.payload.retryAfterMs ?? null, o, report);
    }
    if (a.kind === 'error' && !a.retryable) return { kind: 'refused', message: a.error.message, code: a.error.code };
    if (tries >= o.maxTries) return { kind: 'unknown', code: a.kind === 'error' ? a.error.code : null };
    const retry: RetryNote = a.kind === 'error' ? { kind: 'busy', code: a.error.code, waitMs: a.hintMs ?? 600 } : { kind: 'lost' };
    // The broken habit: the retry is taken for a new order, with a new cart and a new key.
    const secret = await o.newSession();
    if (secret) current = { ...current, checkoutSession: secret };
    key = o.mintKey();
    report({ kind: 'paying', retry }, key);
    await o.wait(a.kind === 'error' && a.hintMs ? a.hintMs : 600);
  }
}

/** PROCESSING: asks chargeStatus at the server's pace until a final status. */
async function poll(key: string, session: string, retryAfterMs: number | null, o: NaiveOptions, report: NaiveReport): Promise<Phase> {
  for (let checks = 0; ; checks++) {
    const wait = retryAfterMs && retryAfterMs > 0 ? retryAfterMs : 1_000;
    const at = o.now() + wait;
    report({ kind: 'processing', key, checks, retryAfterMs, nextCheckAt: at, remainingMs: wait, checking: false, charging: false }, key);
    await o.wait(wait);
    if (!o.live()) return { kind: 'idle' };
    const a = await send(o.endpoint, 'chargeStatus', { idempotencyKey: key, checkoutSession: session });
    if (!o.live()) return { kind: 'idle' };
    if (a.kind === 'payload' && a.payload && a.payload.status !== 'PROCESSING') return { kind: 'final', payload: a.payload };
    if (a.kind === 'payload' && a.payload) retryAfterMs = a.payload.retryAfterMs ?? retryAfterMs;
  }
}
