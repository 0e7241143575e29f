// @chargeonce/client: charge a card at most once per attempt with
// chargeonce, from a checkout page or a server. Framework-free; the React
// hook is in @chargeonce/client/react.
export { createCharger, uuid, requestTimeoutMsDefault } from './charger.js';
export type { Charger, ChargerOptions, ChargerEnvironment, PayOptions } from './charger.js';
export { AbortError, AttemptOpenError, ChargeRejectedError, ChargerStateError, UnknownOutcomeError } from './errors.js';
export type { ChargerEvent } from './events.js';
export { step, initialState, machineDefaults, pollDelay } from './machine.js';
export type { Effect, MachineConfig, MachineEvent, Progress, Result, Step } from './machine.js';
export { backoffMs, hintMs, parseRetryAfter, retryDefaults, retryPolicy, retryWaitMs } from './backoff.js';
export { classify, retryableCodes } from './transport.js';
export type { Answer } from './transport.js';
export { readRecord, recordName, sameInput } from './record.js';
export type { AttemptRecord } from './record.js';
export type { StorageSpec } from './storage.js';
export type {
  Charge,
  ChargeCardInput,
  ChargeFailure,
  ChargePayload,
  ChargeStatus,
  ChargerState,
  KeyValueStorage,
  LiveMode,
  Outcome,
  PayInput,
  RetryOptions,
  ServerError,
  StateKind,
} from './types.js';
