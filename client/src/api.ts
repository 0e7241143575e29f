// The charger's public shapes: what createCharger() takes and what it
// returns. charger.ts implements them; index.ts exports them.
import type { ChargerEvent } from './events.js';
import type { StorageSpec } from './storage.js';
import type { ChargerState, LiveMode, Outcome, PayInput, RetryOptions } from './types.js';
import type { ChargerEnvironment } from './page.js';

export type { ChargerEnvironment };

export interface ChargerOptions {
  /** chargeonce's /graphql URL. */
  endpoint: string;
  /** A publishable key (co_pk_…), sent as Authorization: Bearer. */
  publishableKey?: string;
  /** Headers for every request, e.g. { Authorization: 'Bearer co_sk_…' } server to server. */
  headers?: Record<string, string>;
  /** The checkout session's client secret: sent as input.checkoutSession, and the default scope. */
  session?: string;
  /** What one attempt belongs to (one open attempt per scope): the session by default. */
  scope?: string;
  /** Where the attempt record lives: 'session' (default), 'local' (shared by tabs), or your own. */
  storage?: StorageSpec;
  /** How PROCESSING is followed: 'sse' (default), 'ws' or 'poll'; a stream that fails falls back to polling. */
  live?: LiveMode;
  /** The websocket URL for live: 'ws' (endpoint with ws(s): by default). */
  wsEndpoint?: string;
  /** One sender per scope across tabs (default true). */
  crossTab?: boolean;
  onEvent?: (e: ChargerEvent) => void;
  fetch?: typeof fetch;
  /** Mints a key for a new attempt: crypto.randomUUID() by default, which a page outside a secure context lacks: it must pass its own. */
  mintKey?: () => string;
  retry?: RetryOptions;
  /** A request unanswered after this long is a lost one (default 30 s). */
  requestTimeoutMs?: number;
  /**
   * A W3C trace context the page gives (traceparent, e.g. from its own
   * tracer): sent as the traceparent header of every request to chargeonce
   * (not the websocket, which carries no headers), so that the server's
   * trace of the payment joins the page's. Malformed, createCharger throws.
   */
  traceparent?: string;
  /** The trace context's vendor part (tracestate), sent with traceparent only. */
  tracestate?: string;
  /** The browser, for tests: globalThis's by default. */
  environment?: ChargerEnvironment;
}

export interface PayOptions {
  /** Stops waiting (an AbortError), never the attempt: it stays persisted and resume() follows it. */
  signal?: AbortSignal;
}

export interface Charger {
  readonly state: ChargerState;
  /** Calls fn on every state change; returns the unsubscribe function. */
  subscribe(fn: (state: ChargerState) => void): () => void;
  /** Charges input once: the outcome (a decline is FAILED, not an error), or a typed error. */
  pay(input: PayInput, options?: PayOptions): Promise<Outcome>;
  /**
   * Follows this scope's open attempt to its outcome; null when there is
   * none. With no record, on the return from the bank (chargeonce_key in
   * the address), follows that key by chargeStatus only.
   */
  resume(): Promise<Outcome | null>;
  /** After SUCCEEDED, FAILED or a rejection only: the next pay() gets a new key. Throws otherwise. */
  reset(): void;
  /**
   * Only while the shopper must authenticate (state following, not paused,
   * with attempt.nextAction): takes the page to attempt.nextAction.url; the
   * attempt is persisted first, and resume() on the return follows it.
   * Throws ChargerStateError otherwise.
   */
  handleNextAction(): void;
  on(type: 'event', fn: (e: ChargerEvent) => void): () => void;
  /** Stops timers, streams and listeners; waiting promises reject with AbortError. */
  close(): void;
}
