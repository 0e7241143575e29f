// The shapes chargeonce speaks (graph/schema.graphqls) and the charger's
// own: its state, its outcomes and its options. Types only: nothing here
// runs.

/** What chargeCard charges. With a checkout session, only paymentMethod is needed. */
export interface ChargeCardInput {
  paymentMethod: string;
  amount?: number;
  currency?: string;
  orderId?: string;
  description?: string;
  checkoutSession?: string;
  /** Server to server (secret key) only: opts the charge in to customer authentication; with a session it comes from the session. */
  returnUrl?: string;
  /**
   * MANUAL: the charge only authorizes (the card's money is held), and the
   * merchant's server captures it later or voids it, with its secret key.
   * AUTOMATIC (the default) takes the money with the charge. With a
   * session it comes from the session, and if sent must equal the
   * session's. Part of the input: the same key with another method is
   * another payment.
   */
  captureMethod?: CaptureMethod;
}

/** When a charge's money is taken: with the charge, or later by captureCharge. */
export type CaptureMethod = 'AUTOMATIC' | 'MANUAL';

/** Where a charge stands in its captures. */
export type CaptureStatus = 'UNCAPTURED' | 'PARTIALLY_CAPTURED' | 'CAPTURED' | 'VOIDED' | 'EXPIRED';

/** What pay() takes: the card, and for server-to-server use the terms. The session comes from the charger. */
export type PayInput = Omit<ChargeCardInput, 'checkoutSession'> & { checkoutSession?: string };

export type ChargeStatus = 'PROCESSING' | 'SUCCEEDED' | 'FAILED';

/** What every charge carries, whatever its capture. */
export interface ChargeDetails {
  id: string;
  /** What was authorized (MANUAL) or charged (AUTOMATIC), in minor units. */
  amount: number;
  currency: string;
  orderId?: string | null;
  providerChargeId: string;
  createdAt: string;
  /** What has been taken so far: all of an AUTOMATIC charge. */
  amountCaptured: number;
  /** What a capture may still take now: 0 unless the authorization is open. */
  amountCapturable: number;
}

/**
 * Where a charge's money stands, by captureStatus, each kind with what
 * holds for it: an open authorization always has the time it lapses, a
 * charge captured or voided never has one. An AUTOMATIC charge is CAPTURED.
 * The status is the one of the answer that settled the attempt; captures
 * and voids made later (by the merchant's server) do not change it here.
 */
export type ChargeCapture =
  /** Taken: all of an AUTOMATIC charge; of a MANUAL one, captured in full or by its final capture (the rest released). */
  | { captureStatus: 'CAPTURED'; authorizationExpiresAt: null }
  /** Authorized (MANUAL) and open: amountCapturable may be captured until authorizationExpiresAt; PARTIALLY_CAPTURED: amountCaptured already was. */
  | { captureStatus: 'UNCAPTURED' | 'PARTIALLY_CAPTURED'; authorizationExpiresAt: string }
  /** The authorization was voided: nothing was taken, the hold is released. */
  | { captureStatus: 'VOIDED'; authorizationExpiresAt: null }
  /** The authorization lapsed at authorizationExpiresAt: what was not captured was released. */
  | { captureStatus: 'EXPIRED'; authorizationExpiresAt: string };

/** Money that moved, or that an authorization holds: narrow on captureStatus. */
export type Charge = ChargeDetails & ChargeCapture;

/** Why nothing was charged. */
export interface ChargeFailure {
  code: string;
  message: string;
}

/**
 * What the shopper must do before the attempt can end: authenticate with
 * their bank (3-D Secure) on the provider's challenge page at url, before
 * expiresAt. The provider sends them back to the session's returnUrl with
 * chargeonce_key added.
 */
export interface NextAction {
  type: 'REDIRECT';
  url: string;
  expiresAt: string;
}

/** chargeonce's ChargeCardPayload. */
export interface ChargePayload {
  idempotencyKey: string;
  status: ChargeStatus;
  replayed: boolean;
  charge?: Charge | null;
  failure?: ChargeFailure | null;
  retryAfterMs?: number | null;
  expiresAt?: string | null;
  /** PROCESSING only: the shopper must authenticate first. The same on every answer of the attempt until it is final. */
  nextAction?: NextAction | null;
}

/** How an attempt ended. A decline is an outcome, not an exception. */
export type Outcome =
  | { status: 'SUCCEEDED'; key: string; charge: Charge; replayed: boolean }
  | { status: 'FAILED'; key: string; failure: ChargeFailure; replayed: boolean };

/** A GraphQL error of chargeonce, as extensions.code names it. */
export interface ServerError {
  code: string;
  message: string;
  field?: string;
  /** The error's other extensions, e.g. refundable with REFUND_EXCEEDS_CHARGE, capturable with CAPTURE_EXCEEDS_AUTHORIZATION. */
  extensions?: Record<string, unknown>;
}

export type StateKind =
  /** No attempt. pay() starts one. */
  | 'idle'
  /** chargeCard is on the wire. */
  | 'sending'
  /** No answer (or a busy server): waiting retryInMs before sending the same key again. */
  | 'retrying'
  /** Offline, or hidden while waiting: nothing is sent and no budget is spent until it comes back. */
  | 'paused'
  /** The server said PROCESSING: followed live (SSE, websocket) or by polling chargeStatus. */
  | 'processing'
  /** The shopper must authenticate: see nextAction; handleNextAction() takes them there. Followed as processing is. */
  | 'action'
  /** Retries spent, or expiresAt passed, without an answer. Resumable with the same key; never a new one. */
  | 'unknown'
  /** SUCCEEDED or FAILED: see outcome. */
  | 'settled'
  /** The server refused the request without running it: see error. */
  | 'rejected';

/** How a PROCESSING attempt is being followed. */
export type LiveMode = 'sse' | 'ws' | 'poll';

/** Where the charger is. Rendering only draws this. */
export interface ChargerState {
  kind: StateKind;
  /** The attempt's idempotency key, once minted. */
  key?: string;
  /** What the attempt charges: frozen while the attempt is open. */
  input?: ChargeCardInput;
  outcome?: Outcome;
  /** Why it was rejected, or the last error seen while its outcome is unknown. */
  error?: ServerError;
  /** When retrying or polling: how long until the next request. */
  retryInMs?: number;
  /** chargeCard sends so far for this attempt (1 for the first). */
  attempt?: number;
  /** When the server may forget the attempt's stored result. */
  expiresAt?: string;
  /** paused: why. */
  pausedBy?: 'offline' | 'hidden';
  /** The kind to go back to when the pause ends. */
  pausedFrom?: 'retrying' | 'processing' | 'action' | 'unknown';
  /**
   * action: where the shopper authenticates. Also kept while an attempt
   * that waited for it is sent again (after a reload, on the return from
   * the bank), until the server's answer says what holds now.
   */
  nextAction?: NextAction;
  /** processing, action: how it is followed right now ('poll' once a stream failed). */
  live?: LiveMode;
  /** navigator.onLine said false, and no online event has come since. */
  offline?: boolean;
  /** The page is hidden (visibilitychange). */
  hidden?: boolean;
  /** The attempt is driven by another tab; this one only shows its progress. */
  remote?: boolean;
  /** Bookkeeping for the retry budget: when the current run of sends began, and how many were made. */
  since?: number;
  tries?: number;
  /** processing: chargeStatus questions asked so far. */
  checks?: number;
  /** processing: the stream has answered at least once. */
  liveOpen?: boolean;
  /** processing: the server's pace. */
  pollMs?: number;
}

/** Web Storage, as far as the charger needs it. */
export interface KeyValueStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface RetryOptions {
  /** The first retry waits up to this (full jitter), each next one up to twice as long. */
  baseMs?: number;
  /** The longest wait, the server's hint included. */
  capMs?: number;
  /** How long one run of sends may go on without an answer before the outcome is unknown. */
  budgetMs?: number;
  /** Sends in one run, the first included. */
  maxAttempts?: number;
}
