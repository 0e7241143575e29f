// @chargeonce/client/server: the merchant's server's half, in Node, with
// its secret key: createCheckoutSession, refundCharge, captureCharge and
// voidCharge, each run by the operation runner with its key kept in a
// store before the first byte (a file per name, memory, or the merchant's
// own database behind the KeyStore interface). The file store imports
// node:fs, which is why this entry is apart from the core.
export { createMerchant, merchantOperations } from './merchant.js';
export type { CaptureOutcome, Merchant, MerchantOptions, RefundOutcome, SessionOutcome, VoidOutcome } from './merchant.js';
export type {
  Capture,
  CaptureInput,
  CapturePayload,
  CheckoutSession,
  CheckoutSessionInput,
  CheckoutSessionPayload,
  Refund,
  RefundInput,
  RefundPayload,
  Void,
  VoidInput,
  VoidPayload,
} from './merchant-documents.js';
export { fileKeyStore } from './filestore.js';
export { createRunner, memoryKeyStore, NameInUseError, OperationRejectedError, OperationUnknownError, AbortError } from './index.js';
export type {
  KeyStore,
  Operation,
  OperationFailure,
  OperationOutcome,
  OperationPayload,
  OperationRecord,
  RetryOptions,
  Runner,
  RunnerEvent,
  RunnerOptions,
  RunOptions,
} from './index.js';
