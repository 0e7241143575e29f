// The library's GraphQL documents against the server's schema
// (graph/schema.graphqls): each one validates, its charge selection is
// exactly the fields of the Charge type the library hands out, the merchant's
// operations select exactly the fields of the types @chargeonce/client/server
// hands out, and the enums it types by hand are the schema's. The documents are generated from
// client/operations.graphql; the types are written by hand, and this is
// what keeps them honest.
import { readFileSync } from 'node:fs';
import { buildSchema, GraphQLEnumType, Kind, parse, validate, type FieldNode, type SelectionSetNode } from 'graphql';
import { describe, expect, it } from 'vitest';
import { subscription } from '../src/stream.js';
import * as generated from '../src/generated/operations.js';
import { chargeCardDocument, chargeStatusDocument } from '../src/generated/operations.js';
import type { CaptureMethod, CaptureStatus, Charge } from '../src/types.js';
import type { CapturedCharge, CapturePayload, CheckoutSession, CheckoutSessionPayload, Refund, RefundPayload, Void, VoidPayload } from '../src/merchant-types.js';
import type { OperationStatus } from '../src/operation.js';

const schema = buildSchema(readFileSync(new URL('../../graph/schema.graphqls', import.meta.url), 'utf8'));

const documents = { ...generated, chargeUpdated: subscription.query };

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
const refundFields: Fields<Refund> = { id: true, chargeId: true, amount: true, currency: true, providerRefundId: true, status: true, createdAt: true };
const captureFields: Fields<CapturedCharge['captures'][number]> = { id: true, chargeId: true, amount: true, final: true, createdAt: true };
const voidFields: Fields<Void> = { id: true, chargeId: true, createdAt: true };
const capturedChargeFields: Fields<CapturedCharge> = {
  id: true, amount: true, providerChargeId: true, captureStatus: true, amountCaptured: true, amountCapturable: true,
  authorizationExpiresAt: true, amountRefunded: true, captures: true,
};
const sessionFields: Fields<CheckoutSession> = {
  id: true, clientSecret: true, status: true, amount: true, currency: true, orderId: true, expiresAt: true, attempts: true, maxAttempts: true,
};
const payloadFields = { idempotencyKey: true, status: true, replayed: true, retryAfterMs: true, failure: true } as const;
const refundPayloadFields: Fields<RefundPayload> = { ...payloadFields, refund: true };
const capturePayloadFields: Fields<CapturePayload> = { ...payloadFields, capture: true, charge: true };
const voidPayloadFields: Fields<VoidPayload> = { ...payloadFields, void: true, charge: true };
const sessionPayloadFields: Fields<CheckoutSessionPayload> = { idempotencyKey: true, replayed: true, session: true };
const sessionStatuses: Record<CheckoutSession['status'], true> = { OPEN: true, PAID: true, EXPIRED: true };
const operationStatuses: Record<OperationStatus, true> = { PROCESSING: true, SUCCEEDED: true, FAILED: true };
const captureStatuses: Record<CaptureStatus, true> = { UNCAPTURED: true, PARTIALLY_CAPTURED: true, CAPTURED: true, VOIDED: true, EXPIRED: true };
const captureMethods: Record<CaptureMethod, true> = { AUTOMATIC: true, MANUAL: true };

/** The names selected under path (field names from the operation's root) in doc, through the fragments it spreads. */
function selected(doc: string, path: string[]): string[] {
  const defs = parse(doc).definitions;
  const op = defs[0];
  if (op?.kind !== Kind.OPERATION_DEFINITION) throw new Error('no operation');
  const fields = (set: SelectionSetNode | undefined): FieldNode[] =>
    (set?.selections ?? []).flatMap((s) => {
      if (s.kind === Kind.FIELD) return [s];
      if (s.kind !== Kind.FRAGMENT_SPREAD) return [];
      const f = defs.find((d) => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === s.name.value);
      return f?.kind === Kind.FRAGMENT_DEFINITION ? fields(f.selectionSet) : [];
    });
  let set: SelectionSetNode | undefined = op.selectionSet;
  for (const name of path) set = fields(set).find((s) => s.name.value === name)?.selectionSet;
  return fields(set).map((s) => s.name.value);
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
    ['refundChargeDocument', generated.refundChargeDocument, 'refundCharge', refundPayloadFields, 'refund', refundFields],
    ['refundStatusDocument', generated.refundStatusDocument, 'refundStatus', refundPayloadFields, 'refund', refundFields],
    ['captureChargeDocument', generated.captureChargeDocument, 'captureCharge', capturePayloadFields, 'capture', captureFields],
    ['captureStatusDocument', generated.captureStatusDocument, 'captureStatus', capturePayloadFields, 'capture', captureFields],
    ['voidChargeDocument', generated.voidChargeDocument, 'voidCharge', voidPayloadFields, 'void', voidFields],
    ['voidStatusDocument', generated.voidStatusDocument, 'voidStatus', voidPayloadFields, 'void', voidFields],
    ['createCheckoutSessionDocument', generated.createCheckoutSessionDocument, 'createCheckoutSession', sessionPayloadFields, 'session', sessionFields],
  ])('%s selects every field of its payload and of what it made, and only those', (_, doc, field, payload, made, fields) => {
    expect(selected(doc, [field]).sort()).toEqual(Object.keys(payload).sort());
    expect(selected(doc, [field, made]).sort()).toEqual(Object.keys(fields).sort());
    if ('charge' in payload) {
      expect(selected(doc, [field, 'charge']).sort()).toEqual(Object.keys(capturedChargeFields).sort());
      expect(selected(doc, [field, 'charge', 'captures']).sort()).toEqual(Object.keys(captureFields).sort());
    }
  });

  it("the hand-typed enums are the schema's", () => {
    expect(Object.keys(captureStatuses).sort()).toEqual(enumValues('CaptureStatus'));
    expect(Object.keys(captureMethods).sort()).toEqual(enumValues('CaptureMethod'));
    expect(Object.keys(sessionStatuses).sort()).toEqual(enumValues('CheckoutSessionStatus'));
    expect(Object.keys(operationStatuses).sort()).toEqual(enumValues('RefundStatus'));
    expect(Object.keys(operationStatuses).sort()).toEqual(enumValues('CaptureAttemptStatus'));
  });
});
