// @chargeonce/client/server: the merchant's server's half, in Node, with
// its secret key: createCheckoutSession, refundCharge, captureCharge and
// voidCharge, each run by the operation runner with its key kept in a
// store before the first byte (a file per name, memory, or the merchant's
// own database behind the KeyStore interface). The file store imports
// node:fs, which is why this entry is apart from the core.
export { createMerchant, merchantOperations } from './merchant.js';
export type { CaptureOutcome, ChargeOutcome, Merchant, MerchantOptions, RefundOutcome, SessionOutcome, VoidOutcome } from './merchant.js';
export type {
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
export { fileKeyStore } from './filestore.js';
// What a merchant's server needs of the core beside them, so that it imports from one entry.
export { memoryKeyStore, type KeyStore } from './keystore.js';
export { AbortError } from './errors.js';
export { NameInUseError, OperationRejectedError, OperationUnknownError } from './operation-errors.js';
export type { OperationFailure, OperationOutcome, RunnerEvent, RunOptions } from './operation.js';
export type { RetryOptions } from './types.js';
