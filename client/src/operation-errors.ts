// The errors the operation runner rejects with. Each names the record
// (recordName, the caller's name for it) and its key; a FAILED operation
// (a decline) is an outcome, never one of these.
import type { OperationRecord } from './operation.js';

/**
 * The server refused the operation without running it (extensions.code):
 * nothing was done under key. extensions holds the error's others, e.g.
 * refundable with REFUND_EXCEEDS_CHARGE.
 */
export class OperationRejectedError extends Error {
  override readonly name = 'OperationRejectedError';
  constructor(
    readonly recordName: string,
    readonly key: string,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly extensions?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * No answer within the retry budget (or a record past the server's
 * expiresAt that the server no longer knows): it may or may not have been
 * done. The record stays open; running the name again asks again with the
 * same key, never a new one.
 */
export class OperationUnknownError extends Error {
  override readonly name = 'OperationUnknownError';
  constructor(
    readonly recordName: string,
    readonly key: string,
  ) {
    super(`${recordName} (key ${key}): outcome unknown; run it again to ask again with the same key`);
  }
}

/**
 * The name holds a record that does not allow the call: another input (or
 * another operation) under it, or forget() of a record still open.
 */
export class NameInUseError extends Error {
  override readonly name = 'NameInUseError';
  constructor(
    readonly recordName: string,
    readonly key: string,
    readonly status: OperationRecord['status'],
  ) {
    super(
      status === 'open'
        ? `${recordName} is open under key ${key}: run it with its own input to follow it; it cannot be forgotten before it ends`
        : `${recordName} is ${status} with another input under key ${key}: forget() it first`,
    );
  }
}
