// The shapes the merchant's server's operations (secret key only) take and
// answer: their inputs as graph/schema.graphqls has them, their payloads as
// client/operations.graphql selects them (src/generated/operations.ts).
// test/documents.test.ts checks that each selection is exactly its type's
// fields.
import type { CaptureMethod, CaptureStatus } from './types.js';
import type { OperationFailure, OperationStatus } from './operation.js';

export interface CheckoutSessionInput {
  /** Minor units, 1..99999999. */
  amount: number;
  currency: string;
  orderId?: string;
  description?: string;
  /** Opts the session's charges in to customer authentication (3-D Secure): where the shopper comes back. */
  returnUrl?: string;
  /** Default 3600, at most 86400. */
  expiresInSeconds?: number;
  captureMethod?: CaptureMethod;
}

export interface CheckoutSession {
  id: string;
  /** What the page pays the session with, beside a publishable key: in the creating answer and its replay only. */
  clientSecret: string | null;
  status: 'OPEN' | 'PAID' | 'EXPIRED';
  amount: number;
  currency: string;
  orderId: string | null;
  expiresAt: string;
  attempts: number;
  maxAttempts: number;
}

export interface RefundInput {
  /** Charge.id. */
  chargeId: string;
  /** Minor units; what remains refundable when left out. */
  amount?: number;
  reason?: string;
}

export interface Refund {
  id: string;
  chargeId: string;
  amount: number;
  currency: string;
  providerRefundId: string | null;
  status: OperationStatus;
  createdAt: string;
}

export interface CaptureInput {
  /** Charge.id of a charge made with captureMethod MANUAL. */
  chargeId: string;
  /** Minor units; all that is capturable when left out. */
  amount?: number;
  /** True (the default) releases the rest of the authorization; false lets more captures follow. */
  final?: boolean;
}

export interface Capture {
  id: string;
  chargeId: string;
  amount: number;
  final: boolean;
  createdAt: string;
}

/** A charge as its captures and voids left it: what captureCharge and voidCharge answer with. */
export interface CapturedCharge {
  id: string;
  amount: number;
  providerChargeId: string;
  captureStatus: CaptureStatus;
  amountCaptured: number;
  amountCapturable: number;
  authorizationExpiresAt: string | null;
  amountRefunded: number;
  captures: Capture[];
}

export interface VoidInput {
  chargeId: string;
}

export interface Void {
  id: string;
  chargeId: string;
  createdAt: string;
}

/** What createCheckoutSession answers: no status, the session, once created or replayed. */
export interface CheckoutSessionPayload {
  idempotencyKey: string;
  replayed: boolean;
  session: CheckoutSession;
}

interface Payload {
  idempotencyKey: string;
  status: OperationStatus;
  replayed: boolean;
  retryAfterMs: number | null;
  failure: OperationFailure | null;
}

export interface RefundPayload extends Payload {
  refund: Refund | null;
}

export interface CapturePayload extends Payload {
  capture: Capture | null;
  /** The charge as it is now. */
  charge: CapturedCharge | null;
}

export interface VoidPayload extends Payload {
  void: Void | null;
  /** The charge as it is now. */
  charge: CapturedCharge | null;
}
