// The merchant's server's half of chargeonce, with its secret key: create
// a checkout session, refund, capture and void, each an operation of the
// runner (runner.ts), so each keeps its key in the merchant's store before
// the first byte and ends with a typed outcome.
import {
  captureChargeDocument,
  captureStatusDocument,
  createCheckoutSessionDocument,
  refundChargeDocument,
  refundStatusDocument,
  voidChargeDocument,
  voidStatusDocument,
} from './generated/operations.js';
import type {
  Capture,
  CaptureInput,
  CapturePayload,
  CapturedCharge,
  CheckoutSession,
  CheckoutSessionInput,
  CheckoutSessionPayload,
  Refund,
  RefundInput,
  RefundPayload,
  Void,
  VoidInput,
  VoidPayload,
} from './merchant-types.js';
import { chargeOperation } from './charge-operation.js';
import type { KeyStore } from './keystore.js';
import type { Operation, OperationOutcome, OperationPayload, RunnerEvent, RunOptions } from './operation.js';
import { createRunner } from './runner.js';
import { post, requestTimeoutMsDefault, type PostOptions } from './transport.js';
import type { Charge, ChargeCardInput, RetryOptions } from './types.js';

export interface MerchantOptions {
  /** chargeonce's /graphql URL. */
  endpoint: string;
  /** The merchant's secret key, co_sk_…: sent as Authorization: Bearer. It never reaches a browser. */
  secretKey: string;
  /** Where each operation's key is kept before it is sent: fileKeyStore(dir), memoryKeyStore(), or the merchant's database's. */
  store: KeyStore;
  /** Headers for every request besides Authorization. */
  headers?: Record<string, string>;
  retry?: RetryOptions;
  onEvent?: (e: RunnerEvent) => void;
  /** globalThis.fetch by default. */
  fetch?: typeof fetch;
  /** A request unanswered after this long is a lost one (default 30 s). */
  requestTimeoutMs?: number;
  /** Mints a key for a new record: crypto.randomUUID() by default. */
  mintKey?: () => string;
  /** The server's KEY_RETENTION (24 h by default): an open record older than this is only asked about, never sent again. */
  keyRetentionMs?: number;
}

/** createCheckoutSession's outcome: it has no status of its own, so an answer is always the session. */
export type SessionOutcome = { status: 'SUCCEEDED'; key: string; replayed: boolean; session: CheckoutSession };
/** chargeCard's outcome: a decline is FAILED, not an error. */
export type ChargeOutcome = OperationOutcome<{ charge: Charge }>;
export type RefundOutcome = OperationOutcome<{ refund: Refund }>;
/** charge: the charge as it stands after the capture. */
export type CaptureOutcome = OperationOutcome<{ capture: Capture; charge: CapturedCharge | null }>;
export type VoidOutcome = OperationOutcome<{ void: Void; charge: CapturedCharge | null }>;

/**
 * The merchant's operations. name is the merchant's own for the operation
 * (e.g. `refund:order-42`): one name, one key, one operation, however often
 * it is called, across restarts, until forget(name).
 */
export interface Merchant {
  createCheckoutSession(name: string, input: CheckoutSessionInput, options?: RunOptions): Promise<SessionOutcome>;
  /** A charge server to server, with the terms in input: the charger's operation, run by the runner. */
  chargeCard(name: string, input: ChargeCardInput, options?: RunOptions): Promise<ChargeOutcome>;
  refundCharge(name: string, input: RefundInput, options?: RunOptions): Promise<RefundOutcome>;
  captureCharge(name: string, input: CaptureInput, options?: RunOptions): Promise<CaptureOutcome>;
  voidCharge(name: string, input: VoidInput, options?: RunOptions): Promise<VoidOutcome>;
  /** Drops a settled or rejected record; an open one throws NameInUseError. */
  forget(name: string): Promise<void>;
}

type SessionPayload = OperationPayload & { session: CheckoutSession };

/** The merchant's operations for the runner, each sending with o. */
export function merchantOperations(o: Omit<PostOptions, 'signal'>) {
  const ask = <P>(operationName: string, query: string, field: string, variables: Record<string, unknown>) => post<P>({ operationName, query, variables }, field, o);

  const createCheckoutSession: Operation<CheckoutSessionInput, SessionPayload, { session: CheckoutSession }> = {
    name: 'createCheckoutSession',
    async send(key, input) {
      const a = await ask<CheckoutSessionPayload>('CreateCheckoutSession', createCheckoutSessionDocument, 'createCheckoutSession', { idempotencyKey: key, input });
      if (a.kind !== 'payload') return a;
      // Idempotent on its key, with no PROCESSING: an answer is the session, made or replayed.
      const p = a.payload;
      return { ...a, payload: p && { status: 'SUCCEEDED', replayed: p.replayed, session: p.session } };
    },
    made: (p) => (p.session ? { session: p.session } : null),
  };

  const refundCharge: Operation<RefundInput, RefundPayload, { refund: Refund }> = {
    name: 'refundCharge',
    send: (key, input) => ask('RefundCharge', refundChargeDocument, 'refundCharge', { idempotencyKey: key, input }),
    status: (key) => ask('RefundStatus', refundStatusDocument, 'refundStatus', { idempotencyKey: key }),
    made: (p) => (p.refund ? { refund: p.refund } : null),
  };

  const captureCharge: Operation<CaptureInput, CapturePayload, { capture: Capture; charge: CapturedCharge | null }> = {
    name: 'captureCharge',
    send: (key, input) => ask('CaptureCharge', captureChargeDocument, 'captureCharge', { idempotencyKey: key, input }),
    status: (key) => ask('CaptureStatusOfKey', captureStatusDocument, 'captureStatus', { idempotencyKey: key }),
    made: (p) => (p.capture ? { capture: p.capture, charge: p.charge } : null),
  };

  const voidCharge: Operation<VoidInput, VoidPayload, { void: Void; charge: CapturedCharge | null }> = {
    name: 'voidCharge',
    send: (key, input) => ask('VoidCharge', voidChargeDocument, 'voidCharge', { idempotencyKey: key, input }),
    status: (key) => ask('VoidStatusOfKey', voidStatusDocument, 'voidStatus', { idempotencyKey: key }),
    made: (p) => (p.void ? { void: p.void, charge: p.charge } : null),
  };

  return { createCheckoutSession, chargeCard: chargeOperation(o), refundCharge, captureCharge, voidCharge };
}

/** The merchant's operations with its secret key, their keys kept in o.store. */
export function createMerchant(o: MerchantOptions): Merchant {
  const doFetch = o.fetch ?? ((...a: Parameters<typeof fetch>) => globalThis.fetch(...a));
  const ops = merchantOperations({
    fetch: doFetch,
    endpoint: o.endpoint,
    headers: { ...o.headers, Authorization: `Bearer ${o.secretKey}` },
    timeoutMs: o.requestTimeoutMs ?? requestTimeoutMsDefault,
    now: Date.now,
  });
  const runner = createRunner({
    store: o.store,
    ...(o.retry && { retry: o.retry }),
    ...(o.onEvent && { onEvent: o.onEvent }),
    ...(o.mintKey && { mintKey: o.mintKey }),
    ...(o.keyRetentionMs !== undefined && { keyRetentionMs: o.keyRetentionMs }),
  });
  return {
    createCheckoutSession: (name, input, ro) => runner.run(ops.createCheckoutSession, name, input, ro) as Promise<SessionOutcome>,
    chargeCard: (name, input, ro) => runner.run(ops.chargeCard, name, input, ro),
    refundCharge: (name, input, ro) => runner.run(ops.refundCharge, name, input, ro),
    captureCharge: (name, input, ro) => runner.run(ops.captureCharge, name, input, ro),
    voidCharge: (name, input, ro) => runner.run(ops.voidCharge, name, input, ro),
    forget: (name) => runner.forget(name),
  };
}
