// The library's GraphQL documents against the server's schema
// (graph/schema.graphqls): each one validates, its charge selection is
// exactly the fields of the Charge type the library hands out, and the
// enums it types by hand are the schema's. The types are written by hand
// (the library ships no generated code); this is what keeps them honest.
import { readFileSync } from 'node:fs';
import { buildSchema, GraphQLEnumType, Kind, parse, validate, type FieldNode, type SelectionSetNode } from 'graphql';
import { describe, expect, it } from 'vitest';
import * as merchant from '../src/merchant-documents.js';
import type { Capture, CapturePayload, CheckoutSession, CheckoutSessionPayload, Refund, RefundPayload, Void, VoidPayload } from '../src/merchant-documents.js';
import type { OperationStatus } from '../src/operation.js';
import { subscription } from '../src/stream.js';
import { chargeCardDocument, chargeStatusDocument } from '../src/transport.js';
import type { CaptureMethod, CaptureStatus, Charge } from '../src/types.js';

const schema = buildSchema(readFileSync(new URL('../../graph/schema.graphqls', import.meta.url), 'utf8'));

const merchantDocuments = {
  createCheckoutSessionDocument: merchant.createCheckoutSessionDocument,
  refundChargeDocument: merchant.refundChargeDocument,
  refundStatusDocument: merchant.refundStatusDocument,
  captureChargeDocument: merchant.captureChargeDocument,
  captureStatusDocument: merchant.captureStatusDocument,
  voidChargeDocument: merchant.voidChargeDocument,
  voidStatusDocument: merchant.voidStatusDocument,
};
const documents = { chargeCardDocument, chargeStatusDocument, chargeUpdated: subscription.query, ...merchantDocuments };

/** Every field of Charge, once: the compiler refuses a missing or an unknown one. */
const chargeFields: { [K in keyof Charge]-?: true } = {
  id: true,
  amount: true,
  currency: true,
  orderId: true,
  providerChargeId: true,
  createdAt: true,
  captureStatus: true,
  amountCaptured: true,
  amountCapturable: true,
  authorizationExpiresAt: true,
};
/** Every field of each type the merchant's operations hand out, once. */
type Fields<T> = { [K in keyof T]-?: true };
const refundFields: Fields<Refund> = { id: true, chargeId: true, amount: true, currency: true, reason: true, providerRefundId: true, status: true, createdAt: true };
const captureFields: Fields<Capture> = { id: true, chargeId: true, amount: true, final: true, createdAt: true };
const voidFields: Fields<Void> = { id: true, chargeId: true, createdAt: true };
const sessionFields: Fields<CheckoutSession> = {
  id: true, clientSecret: true, status: true, amount: true, currency: true, orderId: true, description: true, returnUrl: true,
  createdAt: true, expiresAt: true, attempts: true, maxAttempts: true,
};
const payloadFields = { idempotencyKey: true, status: true, replayed: true, retryAfterMs: true, expiresAt: true, failure: true } as const;
const refundPayloadFields: Fields<RefundPayload> = { ...payloadFields, refund: true };
const capturePayloadFields: Fields<CapturePayload> = { ...payloadFields, capture: true, charge: true };
const voidPayloadFields: Fields<VoidPayload> = { ...payloadFields, void: true, charge: true };
const sessionPayloadFields: Fields<CheckoutSessionPayload> = { idempotencyKey: true, replayed: true, session: true };
const captureStatuses: Record<CaptureStatus, true> = { UNCAPTURED: true, PARTIALLY_CAPTURED: true, CAPTURED: true, VOIDED: true, EXPIRED: true };
const captureMethods: Record<CaptureMethod, true> = { AUTOMATIC: true, MANUAL: true };
const sessionStatuses: Record<CheckoutSession['status'], true> = { OPEN: true, PAID: true, EXPIRED: true };
const operationStatuses: Record<OperationStatus, true> = { PROCESSING: true, SUCCEEDED: true, FAILED: true };

/** The names selected under path (field names from the operation's root) in doc. */
function selected(doc: string, path: string[]): string[] {
  const op = parse(doc).definitions[0];
  if (op?.kind !== Kind.OPERATION_DEFINITION) throw new Error('no operation');
  let set: SelectionSetNode | undefined = op.selectionSet;
  for (const name of path) {
    set = set?.selections.find((s): s is FieldNode => s.kind === Kind.FIELD && s.name.value === name)?.selectionSet;
  }
  return (set?.selections ?? []).filter((s): s is FieldNode => s.kind === Kind.FIELD).map((s) => s.name.value);
}

const enumValues = (name: string) => (schema.getType(name) as GraphQLEnumType).getValues().map((v) => v.name).sort();

describe("the library's documents", () => {
  it.each(Object.entries(documents))('%s validates against the schema', (_, doc) => {
    expect(validate(schema, parse(doc)).map((e) => e.message)).toEqual([]);
  });

  it.each([
    ['chargeCardDocument', chargeCardDocument, 'chargeCard'],
    ['chargeStatusDocument', chargeStatusDocument, 'chargeStatus'],
    ['chargeUpdated', subscription.query, 'chargeUpdated'],
  ])('%s selects every field of Charge, and only those', (_, doc, field) => {
    expect(selected(doc, [field, 'charge']).sort()).toEqual(Object.keys(chargeFields).sort());
  });

  it.each([
    ['refundChargeDocument', merchant.refundChargeDocument, 'refundCharge', refundPayloadFields, 'refund', refundFields],
    ['refundStatusDocument', merchant.refundStatusDocument, 'refundStatus', refundPayloadFields, 'refund', refundFields],
    ['captureChargeDocument', merchant.captureChargeDocument, 'captureCharge', capturePayloadFields, 'capture', captureFields],
    ['captureStatusDocument', merchant.captureStatusDocument, 'captureStatus', capturePayloadFields, 'capture', captureFields],
    ['voidChargeDocument', merchant.voidChargeDocument, 'voidCharge', voidPayloadFields, 'void', voidFields],
    ['voidStatusDocument', merchant.voidStatusDocument, 'voidStatus', voidPayloadFields, 'void', voidFields],
    ['createCheckoutSessionDocument', merchant.createCheckoutSessionDocument, 'createCheckoutSession', sessionPayloadFields, 'session', sessionFields],
  ])('%s selects every field of its payload and of what it made, and only those', (_, doc, field, payload, made, fields) => {
    expect(selected(doc, [field]).sort()).toEqual(Object.keys(payload).sort());
    expect(selected(doc, [field, made]).sort()).toEqual(Object.keys(fields).sort());
    if ('charge' in payload) expect(selected(doc, [field, 'charge']).sort()).toEqual(Object.keys(chargeFields).sort());
  });

  it("the hand-typed enums are the schema's", () => {
    expect(Object.keys(captureStatuses).sort()).toEqual(enumValues('CaptureStatus'));
    expect(Object.keys(captureMethods).sort()).toEqual(enumValues('CaptureMethod'));
    expect(Object.keys(sessionStatuses).sort()).toEqual(enumValues('CheckoutSessionStatus'));
    expect(Object.keys(operationStatuses).sort()).toEqual(enumValues('RefundStatus'));
    expect(Object.keys(operationStatuses).sort()).toEqual(enumValues('CaptureAttemptStatus'));
  });
});
