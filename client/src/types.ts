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

/** How a PROCESSING attempt is being followed. */
export type LiveMode = 'sse' | 'ws' | 'poll';

/**
 * The page around the attempt: signals from the environment, not kinds of
 * the attempt. Every state carries them.
 */
export interface ChargerFlags {
  /** navigator.onLine said false, and no online event has come since. */
  offline: boolean;
  /** The page is hidden (visibilitychange). */
  hidden: boolean;
  /**
   * Another tab leads this scope's attempt: this one shows that tab's
   * progress, sends nothing, and takes the attempt over (by asking
   * chargeStatus first) if that tab goes away.
   */
  follower: boolean;
}

/** The attempt a state is about: the same key from the first send to the outcome. */
export interface Attempt {
  /** The idempotency key. */
  key: string;
  /**
   * What the attempt charges, frozen while it is open. null only for a key
   * adopted from the return address (chargeonce_key) after storage lost the
   * attempt: its input was never known here, so it is only ever asked about
   * (chargeStatus), never sent.
   */
  input: ChargeCardInput | null;
  /** When the server may forget the attempt's stored result. */
  expiresAt?: string;
  /**
   * Where the shopper authenticates (3-D Secure), as the server last said:
   * set while the state is following and the shopper must act
   * (handleNextAction() takes them there); also kept while an attempt that
   * waited for it is sent again after a reload or the return from the bank,
   * until the server's answer says what holds now. Persisted with the key.
   */
  nextAction?: NextAction;
  /** chargeCard sends of the attempt by this page so far (1 for the first; 0 before any). */
  sends: number;
}

/** An attempt whose input is known: the only kind that is ever sent. */
export type SendableAttempt = Attempt & { input: ChargeCardInput };

/**
 * One run of chargeCard sends, which the retry budget bounds: budgetMs from
 * since, maxAttempts tries. Coming back online or visible, and resume(),
 * start a new run.
 */
export interface Run {
  since: number;
  tries: number;
}

/** No attempt. pay() or resume() starts one. */
export interface IdleState {
  kind: 'idle';
  /**
   * A pay() of this input waits for another tab's attempt of the scope
   * (flags.follower), whose key this tab has not heard yet; its word, or
   * the scope's sender lock, moves the state on.
   */
  waiting?: ChargeCardInput;
  flags: ChargerFlags;
  paused: false;
}

/** chargeCard is on the wire: attempt.sends is this send's number. */
export interface SendingState {
  kind: 'sending';
  attempt: SendableAttempt;
  run: Run;
  /** Why this send is a retry: the cause of the retrying state it follows ('network', or the error's code); absent when it follows none (a new attempt, a resumed one). */
  cause?: string;
  /** The last error answered for the attempt while its outcome is open; unknown shows it. */
  error?: ServerError;
  flags: ChargerFlags;
  paused: false;
}

/** No answer, or a busy server: the same key goes again in retryInMs. */
export interface RetryingState {
  kind: 'retrying';
  attempt: SendableAttempt;
  run: Run;
  /** The wait before the next send; null while paused (back online or visible sends at once). */
  retryInMs: number | null;
  /** Why: 'network' (no GraphQL answer), or the error's code. */
  cause: string;
  /** The last error answered for the attempt while its outcome is open. */
  error?: ServerError;
  flags: ChargerFlags;
  /** Offline, or hidden: nothing is sent and no budget is spent until the page is back. */
  paused: boolean;
}

/**
 * The server said PROCESSING: the key is followed over the live channel,
 * or by polling chargeStatus, never sent again. While the shopper must
 * authenticate, attempt.nextAction says where.
 */
export interface FollowingState {
  kind: 'following';
  attempt: Attempt;
  /** How it is followed right now: 'poll' once a stream failed or said nothing in time. */
  live: LiveMode;
  /** The stream has answered at least once. */
  liveOpen: boolean;
  /** Why the stream was given up, once it was (the live-failed event's reason, or 'no answer in time'): polled since. */
  liveFailed?: string;
  /** chargeStatus questions asked so far. */
  checks: number;
  /** The server's pace (its retryAfterMs). */
  pollMs: number;
  /** How long until the next chargeStatus: 0 while one is asked; null while none is planned (a stream's first word is awaited, or paused). */
  retryInMs: number | null;
  /** The last error answered for the attempt while its outcome is open. */
  error?: ServerError;
  flags: ChargerFlags;
  /** Offline, or hidden while polling: nothing is asked until the page is back. */
  paused: boolean;
}

/** Retries spent, or expiresAt passed, without an answer: it may or may not have charged. Resumable with the same key; never a new one. */
export interface UnknownState {
  kind: 'unknown';
  attempt: Attempt;
  /** The last error answered, if any. */
  error?: ServerError;
  flags: ChargerFlags;
  paused: false;
}

/** SUCCEEDED or FAILED. */
export interface SettledState {
  kind: 'settled';
  attempt: Attempt;
  outcome: Outcome;
  flags: ChargerFlags;
  paused: false;
}

/** The server refused the request without running it: nothing was charged under the key. */
export interface RejectedState {
  kind: 'rejected';
  attempt: Attempt;
  error: ServerError;
  flags: ChargerFlags;
  paused: false;
}

/**
 * Where the charger is: a union on kind, each kind with exactly its
 * fields, and the page's flags beside it. paused is true only in retrying
 * and following (a waiting kind), while offline or hidden; it is not a
 * kind. Rendering only draws this.
 */
export type ChargerState = IdleState | SendingState | RetryingState | FollowingState | UnknownState | SettledState | RejectedState;

export type StateKind = ChargerState['kind'];

/** A state with an attempt: every kind but idle. */
export type AttemptState = Exclude<ChargerState, IdleState>;

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
