// The GraphQL documents of the merchant's server's operations (secret key
// only), and the shapes they answer, as graph/schema.graphqls has them.
// test/documents.test.ts validates each document against the schema and
// checks that each selection is exactly its type's fields.
import type { Charge, CaptureMethod } from './types.js';
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
  description: string | null;
  returnUrl: string | null;
  createdAt: string;
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
  reason: string | null;
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
  expiresAt: string | null;
  failure: OperationFailure | null;
}

export interface RefundPayload extends Payload {
  refund: Refund | null;
}

export interface CapturePayload extends Payload {
  capture: Capture | null;
  /** The charge as it is now. */
  charge: Charge | null;
}

export interface VoidPayload extends Payload {
  void: Void | null;
  /** The charge as it is now. */
  charge: Charge | null;
}

const charge = 'charge { id amount currency orderId providerChargeId createdAt captureStatus amountCaptured amountCapturable authorizationExpiresAt }';
const payload = 'idempotencyKey status replayed retryAfterMs expiresAt failure { code message }';
const refund = `${payload} refund { id chargeId amount currency reason providerRefundId status createdAt }`;
const capture = `${payload} capture { id chargeId amount final createdAt } ${charge}`;
const voided = `${payload} void { id chargeId createdAt } ${charge}`;

export const createCheckoutSessionDocument = `mutation CreateCheckoutSession($idempotencyKey: String!, $input: CheckoutSessionInput!) {
  createCheckoutSession(idempotencyKey: $idempotencyKey, input: $input) {
    idempotencyKey replayed
    session { id clientSecret status amount currency orderId description returnUrl createdAt expiresAt attempts maxAttempts }
  }
}`;

export const refundChargeDocument = `mutation RefundCharge($idempotencyKey: String!, $input: RefundInput!) {
  refundCharge(idempotencyKey: $idempotencyKey, input: $input) { ${refund} }
}`;

export const refundStatusDocument = `query RefundStatus($idempotencyKey: String!) {
  refundStatus(idempotencyKey: $idempotencyKey) { ${refund} }
}`;

export const captureChargeDocument = `mutation CaptureCharge($idempotencyKey: String!, $input: CaptureInput!) {
  captureCharge(idempotencyKey: $idempotencyKey, input: $input) { ${capture} }
}`;

export const captureStatusDocument = `query CaptureStatus($idempotencyKey: String!) {
  captureStatus(idempotencyKey: $idempotencyKey) { ${capture} }
}`;

export const voidChargeDocument = `mutation VoidCharge($idempotencyKey: String!, $input: VoidInput!) {
  voidCharge(idempotencyKey: $idempotencyKey, input: $input) { ${voided} }
}`;

export const voidStatusDocument = `query VoidStatus($idempotencyKey: String!) {
  voidStatus(idempotencyKey: $idempotencyKey) { ${voided} }
}`;
