// The persisted attempt: its key, what it charges, its scope, and how it
// ended. It is written before the first byte is sent, so that a reload, a
// crash or another tab finds the key instead of minting a new one. An open
// record never expires on the client (an unknown outcome must never be
// forgotten); a settled one is kept until the server's expiresAt, the end
// of its stored result, or until reset().
import type { ChargeCardInput, NextAction, Outcome } from './types.js';

export interface AttemptRecord {
  v: 1;
  key: string;
  /** What the attempt belongs to: the checkout session by default. */
  scope: string;
  input: ChargeCardInput;
  /** Client clock, ms. */
  createdAt: number;
  /** The server's expiresAt once an answer gave it. */
  expiresAt?: string;
  status: 'open' | 'settled';
  outcome?: Outcome;
  /** Open and waiting for the shopper to authenticate: where (so that a reload shows it at once). */
  nextAction?: NextAction;
}

export const recordPrefix = 'chargeonce:attempt:';

/**
 * The storage key of a scope's record. It mixes in the credential (the
 * publishable key, or the Authorization value) so that two shoppers, or
 * two merchants, on one device never share a record; only a hash is
 * stored, never the credential.
 */
export function recordName(scope: string, credential: string): string {
  return recordPrefix + hash(`${credential}\n${scope}`);
}

/** A record read from storage: null when absent, unreadable, or settled and past its expiresAt. */
export function readRecord(raw: string | null, now: number): AttemptRecord | null {
  if (!raw) return null;
  let r: AttemptRecord;
  try {
    r = JSON.parse(raw) as AttemptRecord;
  } catch {
    return null;
  }
  if (!r || r.v !== 1 || typeof r.key !== 'string' || !r.key || !r.input || typeof r.scope !== 'string') return null;
  if (r.status !== 'open' && r.status !== 'settled') return null;
  if (r.status === 'settled' && (!r.outcome || expired(r, now))) return null;
  if (r.outcome?.status === 'SUCCEEDED' && !r.outcome.charge?.captureStatus) {
    // Settled by an earlier version, whose charge did not say where it stands in its captures: asked
    // again under its own key (the server replays it, with its capture), never answered without it.
    return { ...r, status: 'open', outcome: undefined };
  }
  return r;
}

/** Whether the server may have forgotten the attempt's stored result. */
export function expired(r: { expiresAt?: string | undefined }, now: number): boolean {
  if (!r.expiresAt) return false;
  const at = Date.parse(r.expiresAt);
  return !Number.isNaN(at) && at <= now;
}

/**
 * Whether two inputs ask for the same (a charge, or any operation's flat
 * input): the server's fingerprint ignores field order and an empty
 * optional field versus an absent one. An attempt adopted from the return
 * address has no input, and matches none.
 */
export function sameInput<I extends object>(a: I | null | undefined, b: I): boolean {
  return !!a && canonical(a) === canonical(b);
}

function canonical(i: object): string {
  const entries = Object.entries(i)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
  return JSON.stringify(entries);
}

/** 64 bits of two FNV-1a hashes, hex: a name, not a secret. */
export function hash(s: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

/**
 * A fresh key, UUID v4, from crypto.randomUUID: every supported browser has
 * it in a secure context (https, or localhost), and Node has it from 19 on.
 * A page served outside a secure context has no randomUUID (nor Web Locks):
 * it must pass mintKey, or pay() rejects with this error before anything is
 * persisted or sent.
 */
export function uuid(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID !== 'function') {
    throw new TypeError('crypto.randomUUID is missing (a page outside a secure context?): pass mintKey to createCharger');
  }
  return c.randomUUID();
}
