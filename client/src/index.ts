// @chargeonce/client: charge a card at most once per attempt with
// chargeonce, from a checkout page or a server. Framework-free; the React
// hook is in @chargeonce/client/react. The retry and record helpers are
// internal: the tests import them from their own files. The one POST and
// its reading of an answer are exported, for a page's own requests beside
// the charger's (a status question, a tool), so that they read answers as
// the charger does.
export { createCharger, returnKeyParam } from './charger.js';
export type { Charger, ChargerOptions, ChargerEnvironment, PayOptions } from './api.js';
export { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from './errors.js';
export type { ChargerEvent } from './events.js';
export { step, initialState } from './machine.js';
export type { Effect, MachineConfig, MachineEvent, Progress, Result, Step } from './machine.js';
export type { StorageSpec } from './storage.js';
export { chargeCardDocument } from './generated/operations.js';
export { nothingRanCodes, post, retryableCodes } from './transport.js';
export type { Answer, GraphQLRequest, PostOptions } from './transport.js';
export type { AttemptRecord } from './record.js';
export type {
  CaptureMethod,
  CaptureStatus,
  Charge,
  ChargeCapture,
  ChargeCardInput,
  ChargeDetails,
  ChargeFailure,
  ChargePayload,
  ChargeStatus,
  ChargerState,
  KeyValueStorage,
  LiveMode,
  NextAction,
  Outcome,
  PayInput,
  RetryOptions,
  ServerError,
  StateKind,
} from './types.js';
