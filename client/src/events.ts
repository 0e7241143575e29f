// What the charger reports as it works: charger.on('event', …) and the
// onEvent option hear each of these, for logs, metrics and timelines.
import type { ChargeStatus, LiveMode, NextAction, StateKind } from './types.js';

export type ChargerEvent =
  /** chargeCard (or chargeStatus) went out: try is chargeCard's send number for the attempt (1 for the first; for chargeStatus, the sends so far). */
  | { type: 'send'; key: string; try: number; operation: 'chargeCard' | 'chargeStatus' }
  /**
   * An answer came back, as the charger reads it (classify): a status
   * (null: chargeStatus knows no such key), an error's code, or why there
   * is no answer (reason); http is absent when no HTTP answer came at all.
   * hintMs: the wait the server asked for (retryAfterMs, or Retry-After);
   * nextAction: the type of a PROCESSING answer's nextAction. Every send
   * is followed by its answer, unless the charger is closed first.
   */
  | {
      type: 'answer';
      key: string;
      operation: 'chargeCard' | 'chargeStatus';
      http?: number;
      status?: ChargeStatus | null;
      code?: string;
      replayed?: boolean;
      reason?: string;
      hintMs?: number;
      nextAction?: NextAction['type'];
    }
  /** The same key goes again after waitMs; cause is 'network' (no GraphQL answer) or the error code. */
  | { type: 'retry'; key: string; try: number; waitMs: number; cause: string }
  /** Waiting stopped: offline, or a hidden tab polling. */
  | { type: 'pause'; key: string; reason: 'offline' | 'hidden' }
  /** Back online or visible: the attempt goes on at once. */
  | { type: 'unpause'; key: string }
  /** The shopper must authenticate (3-D Secure) at url: handleNextAction() takes them there. */
  | { type: 'action'; key: string; url: string }
  | { type: 'live-open'; key: string; mode: Exclude<LiveMode, 'poll'> }
  | { type: 'live-failed'; key: string; mode: Exclude<LiveMode, 'poll'>; reason: string }
  /** No answer within the retry budget (or expiresAt passed): resume() asks again with the same key. */
  | { type: 'unknown'; key: string; expiresAt?: string }
  /** A pay() caller stopped waiting; the attempt goes on. */
  | { type: 'abort'; key: string }
  /** Storage failed; the record lives in memory for this page. */
  | { type: 'storage-fallback'; reason: string }
  /** Another tab sends this scope's attempt; this one follows its progress. */
  | { type: 'remote'; key: string; kind: StateKind }
  /** Web Locks or BroadcastChannel is missing (or crosstab.js could not load): this tab sends without the scope's lock, or hears no other tab. */
  | { type: 'crosstab'; locks: 'web-locks' | 'none'; channel: 'broadcast-channel' | 'none' };
