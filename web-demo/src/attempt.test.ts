import { beforeEach, describe, expect, it } from 'vitest';
import { AttemptStore, attemptStorageKey, type KeyValueStorage } from './attempt';
import type { ChargeCardInput } from './generated/graphql';

class MemoryStorage implements KeyValueStorage {
  readonly items = new Map<string, string>();
  getItem(k: string) {
    return this.items.get(k) ?? null;
  }
  setItem(k: string, v: string) {
    this.items.set(k, v);
  }
  removeItem(k: string) {
    this.items.delete(k);
  }
}

const visa: ChargeCardInput = { paymentMethod: 'pm_card_visa', checkoutSession: 'cs_cart' };
const declined: ChargeCardInput = { ...visa, paymentMethod: 'pm_card_chargeDeclined' };

describe('AttemptStore', () => {
  let storage: MemoryStorage;
  let minted: number;
  const store = () => new AttemptStore(storage, () => `key-${++minted}`, () => new Date('2026-11-29T12:00:00Z'));

  beforeEach(() => {
    storage = new MemoryStorage();
    minted = 0;
  });

  it('mints a key when the first attempt starts', () => {
    const a = store().begin(visa);
    expect(a).toMatchObject({ key: 'key-1', state: 'open', input: visa });
    expect(store().current()?.key).toBe('key-1');
  });

  it('reuses the key of an open attempt: retry, double click, reload', () => {
    const first = store().begin(visa);
    const again = store().begin(visa); // a second click
    const afterReload = new AttemptStore(storage, () => 'never').begin(visa); // a new page, same tab
    expect(again.key).toBe(first.key);
    expect(afterReload.key).toBe(first.key);
    expect(minted).toBe(1);
  });

  it('keeps the input an open attempt was sent with', () => {
    store().begin(visa);
    const a = store().begin(declined);
    expect(a.input.paymentMethod).toBe('pm_card_visa');
  });

  it('refuses to put away an attempt whose outcome is unknown', () => {
    const s = store();
    const a = s.begin(visa);
    expect(s.startNew()).toBe(false);
    expect(s.current()?.key).toBe(a.key);
  });

  it.each(['SUCCEEDED', 'FAILED'] as const)('gives a new attempt a new key after %s', (state) => {
    const s = store();
    const first = s.begin(declined);
    expect(s.settle(first.key, state)).toBe(true);
    expect(() => s.begin(visa)).toThrow(/startNew/);
    expect(s.startNew()).toBe(true);
    const next = s.begin(visa);
    expect(next.key).not.toBe(first.key);
    expect(next.input.paymentMethod).toBe('pm_card_visa');
  });

  it('ignores an answer about another key', () => {
    const s = store();
    s.begin(visa);
    expect(s.settle('key-from-an-old-attempt', 'SUCCEEDED')).toBe(false);
    expect(s.current()?.state).toBe('open');
  });

  it('settles an attempt once', () => {
    const s = store();
    const a = s.begin(visa);
    expect(s.settle(a.key, 'SUCCEEDED')).toBe(true);
    expect(s.settle(a.key, 'FAILED')).toBe(false);
    expect(s.current()?.state).toBe('SUCCEEDED');
  });

  it('discards an open attempt whose checkout session ended, and only that one', () => {
    const s = store();
    const a = s.begin(visa);
    expect(s.discard('another-key')).toBe(false);
    expect(s.discard(a.key)).toBe(true);
    expect(s.current()).toBeNull();
    expect(s.begin(visa).key).toBe('key-2');
    s.settle('key-2', 'SUCCEEDED');
    expect(s.discard('key-2')).toBe(false); // a finished attempt is put away by startNew
  });

  it('treats unreadable storage as no attempt', () => {
    storage.setItem(attemptStorageKey, '{not json');
    expect(store().current()).toBeNull();
    expect(store().begin(visa).key).toBe('key-1');
  });

  it('mints UUIDs with crypto.randomUUID by default', () => {
    const a = new AttemptStore(storage).begin(visa);
    expect(a.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
