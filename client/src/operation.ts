// The shapes of the operation runner (runner.ts): what an operation kind
// is, what a run ends with, what it keeps in the caller's store, and what
// it tells on the way. Types only.
import type { Answer } from './transport.js';
import type { RetryOptions, ServerError } from './types.js';
import type { KeyStore } from './keystore.js';

export type OperationStatus = 'PROCESSING' | 'SUCCEEDED' | 'FAILED';

/** Why an operation failed: nothing was done under its key. */
export interface OperationFailure {
  code: string;
  message: string;
}

/**
 * What an operation's payload says, as chargeonce's payloads say it
 * (RefundPayload, CapturePayload, VoidPayload, ChargeCardPayload), and as a
 * shop's backend that relays them does.
 */
export interface OperationPayload {
  status: OperationStatus;
  replayed: boolean;
  /** With PROCESSING: when to ask again. */
  retryAfterMs?: number | null;
  /** When the server may forget the key's stored result. */
  expiresAt?: string | null;
  /** With FAILED. */
  failure?: OperationFailure | null;
}

/**
 * One kind of idempotent operation: how to send it under a key, how to ask
 * what became of a key, and what a SUCCEEDED payload made. I is its input,
 * P its payload, M what it makes (e.g. { refund }).
 */
export interface Operation<I extends object, P extends OperationPayload, M extends object> {
  /** Names the operation in events and records, e.g. 'refundCharge'. */
  readonly name: string;
  /** Sends the operation under key. Never throws: no answer is a lost Answer (as transport's post does). */
  send(key: string, input: I): Promise<Answer<P>>;
  /**
   * Asks what became of key; a payload of null: the server never saw it.
   * Without it, PROCESSING is followed by sending the same key again (the
   * server replays it), and a record found open is sent again.
   */
  status?(key: string): Promise<Answer<P>>;
  /** What a SUCCEEDED payload made; null when it lacks it (taken for no answer). */
  made(payload: P): M | null;
}

/** How a run ended: what the operation made, or why it failed (a decline is an outcome, not an error). */
export type OperationOutcome<M extends object> =
  | ({ status: 'SUCCEEDED'; key: string; replayed: boolean } & M)
  | { status: 'FAILED'; key: string; replayed: boolean; failure: OperationFailure };

/**
 * What the store holds under a name: written open, with a fresh key and
 * the input, before the first byte is sent; settled once the server said
 * SUCCEEDED or FAILED; rejected when it refused without running anything.
 */
export interface OperationRecord<I extends object = object, M extends object = object> {
  v: 1;
  /** The operation's name: a name holds one operation. */
  operation: string;
  key: string;
  input: I;
  /** Client clock, ISO 8601. */
  createdAt: string;
  status: 'open' | 'rejected' | 'settled';
  /** settled: the outcome, answered again from here. */
  outcome?: OperationOutcome<M>;
  /** rejected: the server's refusal. */
  error?: ServerError;
  /** The server's expiresAt, once an answer gave it: after it, an open record is only asked about, never sent again. */
  expiresAt?: string;
}

/** Which request a run made: the operation, or its status query. */
export type RunRequest = 'send' | 'status';

/** What a run tells on the way, a union on type; name is the record's. */
export type RunnerEvent =
  | { type: 'send'; name: string; key: string; operation: string; request: RunRequest; try: number }
  | {
      type: 'answer';
      name: string;
      key: string;
      operation: string;
      request: RunRequest;
      http?: number;
      /** null: the status query does not know the key. */
      status?: OperationStatus | null;
      replayed?: boolean;
      code?: string;
      reason?: string;
    }
  /** No answer (cause 'network') or a busy server (its code): the same request again after waitMs. */
  | { type: 'retry'; name: string; key: string; operation: string; request: RunRequest; try: number; waitMs: number; cause: string }
  /** PROCESSING: the status query (or the same key) after waitMs. */
  | { type: 'follow'; name: string; key: string; operation: string; waitMs: number }
  | { type: 'unknown'; name: string; key: string; operation: string };

export interface RunnerOptions {
  /** Where the records live: the caller's (fileKeyStore, memoryKeyStore, storageKeyStore, or a database's). */
  store: KeyStore;
  /** { baseMs = 400, capMs = 10000, budgetMs = 45000, maxAttempts = 30 }, as the charger's. */
  retry?: RetryOptions;
  onEvent?: (e: RunnerEvent) => void;
  /** Mints a key for a new record: crypto.randomUUID() by default. */
  mintKey?: () => string;
  /**
   * The server's KEY_RETENTION (24 h by default): an open record older than
   * this is only asked about, never sent again.
   */
  keyRetentionMs?: number;
  /** For tests: the clock and the jitter. */
  clock?: RunnerClock;
  random?: () => number;
}

export interface RunnerClock {
  now(): number;
  /** Resolves after ms. */
  sleep(ms: number): Promise<void>;
}

export interface RunOptions {
  /** Stops waiting (an AbortError), never the operation: its record stays open, and the next run resumes it. */
  signal?: AbortSignal;
}

export interface Runner {
  /**
   * Runs op with input under name, once: the stored outcome of a settled
   * record, else the operation sent (or followed) with the record's key
   * until the server says how it ended. A new name gets a new key,
   * persisted before the first byte.
   */
  run<I extends object, P extends OperationPayload, M extends object>(
    op: Operation<I, P, M>,
    name: string,
    input: I,
    options?: RunOptions,
  ): Promise<OperationOutcome<M>>;
  /** The record under name, or null. */
  record(name: string): Promise<OperationRecord | null>;
  /** Drops a settled or rejected record, so that name may run another input under a new key; an open one throws NameInUseError. */
  forget(name: string): Promise<void>;
}
