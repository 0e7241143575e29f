// The key lifecycle of a checkout: one idempotency key per checkout attempt.
//
// A key is minted when an attempt starts and kept in sessionStorage, so that
// everything that repeats the attempt (an automatic retry, a double click, a
// page reload) sends the same key and chargeonce charges at most once. The
// key is bound to what the attempt charges (the card, and the checkout
// session that fixes the amount): while its outcome is unknown the input
// cannot change, since the same key with another input is refused. Only once
// the attempt reached SUCCEEDED or FAILED may the shopper start a new
// attempt, which gets a new key.
import type { ChargeCardInput } from './generated/graphql';

export type AttemptState = 'open' | 'SUCCEEDED' | 'FAILED';

export interface Attempt {
  /** The idempotency key of this attempt. */
  key: string;
  /** What this attempt charges; the key is bound to it. */
  input: ChargeCardInput;
  /** open until chargeonce answers SUCCEEDED or FAILED for the key. */
  state: AttemptState;
  startedAt: string;
}

/** The subset of the Web Storage API that the store needs. */
export type KeyValueStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

export const attemptStorageKey = 'chargeonce-demo:attempt';

export class AttemptStore {
  constructor(
    private readonly storage: KeyValueStorage,
    private readonly mintKey: () => string = () => crypto.randomUUID(),
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The current attempt, open or finished, or null before the first. */
  current(): Attempt | null {
    const raw = this.storage.getItem(attemptStorageKey);
    if (!raw) return null;
    try {
      const a = JSON.parse(raw) as Attempt;
      if (typeof a.key === 'string' && a.key && a.input && ['open', 'SUCCEEDED', 'FAILED'].includes(a.state)) {
        return a;
      }
    } catch {
      // Unreadable: treated as none, and replaced by the next attempt.
    }
    return null;
  }

  /**
   * The attempt to pay with. An open attempt is returned as it is, with its
   * key and its own input, whatever input is passed: repeating an attempt
   * must not change what it charges. Without one, a new attempt for input
   * starts with a new key. Throws while a finished attempt has not been put
   * away with startNew.
   */
  begin(input: ChargeCardInput): Attempt {
    const cur = this.current();
    if (cur?.state === 'open') return cur;
    if (cur) {
      throw new Error(`attempt ${cur.key} is ${cur.state}: call startNew before paying again`);
    }
    const a: Attempt = { key: this.mintKey(), input: { ...input }, state: 'open', startedAt: this.now().toISOString() };
    this.save(a);
    return a;
  }

  /**
   * Records the final outcome of the attempt with key. An answer about
   * another key (say, a late one from an attempt already put away) is
   * ignored. Returns whether the current attempt changed.
   */
  settle(key: string, state: 'SUCCEEDED' | 'FAILED'): boolean {
    const cur = this.current();
    if (!cur || cur.key !== key || cur.state !== 'open') return false;
    this.save({ ...cur, state });
    return true;
  }

  /**
   * Puts a finished attempt away, so that the next payment starts a new
   * attempt with a new key. Refused (false) while the current attempt is
   * open: its outcome is unknown, and only its own key can settle it.
   */
  startNew(): boolean {
    const cur = this.current();
    if (cur?.state === 'open') return false;
    this.storage.removeItem(attemptStorageKey);
    return true;
  }

  /**
   * Puts away the open attempt with key that chargeonce refused without
   * running it, for good: its checkout session can no longer be paid
   * (CHECKOUT_SESSION_PAID, _EXPIRED, _LOCKED), so the key charged nothing
   * and never will. Returns whether it was the current attempt.
   */
  discard(key: string): boolean {
    const cur = this.current();
    if (!cur || cur.key !== key || cur.state !== 'open') return false;
    this.storage.removeItem(attemptStorageKey);
    return true;
  }

  private save(a: Attempt): void {
    this.storage.setItem(attemptStorageKey, JSON.stringify(a));
  }
}
