// @chargeonce/client: charge a card at most once per attempt with
// chargeonce, from a checkout page or a server. Framework-free; the React
// hook is in @chargeonce/client/react, the merchant's server's operations
// in @chargeonce/client/server. The one POST, its reading of an answer,
// the wait between tries and the operation runner are exported, for a
// page's own requests beside the charger's (a status question, a call to
// its shop's backend), so that they keep the charger's discipline.
export { createCharger, returnKeyParam } from './charger.js';
export type { Charger, ChargerOptions, ChargerEnvironment, PayOptions } from './api.js';
export { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from './errors.js';
export type { ChargerEvent } from './events.js';
export type { StorageSpec } from './storage.js';
export { chargeCardDocument, chargeStatusDocument } from './generated/operations.js';
export { answerEvent, classify, nothingRanCodes, post, retryableCodes } from './transport.js';
export type { Answer, GraphQLRequest, PostOptions } from './transport.js';
export type { AttemptRecord } from './record.js';
// The operation runner, for a page's own calls to its shop's backend (and,
// in @chargeonce/client/server, the merchant's): the record kept before
// the first byte, the charger's wait between tries, its reading of answers.
export { createRunner } from './runner.js';
export { memoryKeyStore, storageKeyStore, type KeyStore } from './keystore.js';
export { NameInUseError, OperationRejectedError, OperationUnknownError } from './operation-errors.js';
export type * from './operation.js';
export { retryPolicy, retryWaitMs } from './backoff.js';
export type {
  Attempt,
  AttemptState,
  CaptureMethod,
  CaptureStatus,
  Charge,
  ChargeCapture,
  ChargeCardInput,
  ChargeDetails,
  ChargeFailure,
  ChargePayload,
  ChargeStatus,
  ChargerFlags,
  ChargerState,
  FollowingState,
  IdleState,
  KeyValueStorage,
  LiveMode,
  NextAction,
  Outcome,
  PayInput,
  RejectedState,
  RetryingState,
  RetryOptions,
  Run,
  SendableAttempt,
  SendingState,
  ServerError,
  SettledState,
  StateKind,
  UnknownState,
} from './types.js';
