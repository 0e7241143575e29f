import { describe, expect, it } from 'vitest';
import { createCharger } from '../src/charger.js';
import type { ChargerEvent } from '../src/events.js';
import { expired, readRecord, recordName, sameInput, type AttemptRecord } from '../src/record.js';
import { resolveStorage, webStorage } from '../src/storage.js';
import { FakeServer, MemoryStorage } from './fakes.js';

const throwing = (what: 'get' | 'set' | 'all') => ({
  getItem(k: string): string | null {
    if (what === 'get' || what === 'all') throw new DOMException('blocked', 'SecurityError');
    return null;
  },
  setItem() {
    if (what === 'set' || what === 'all') throw new DOMException('full', 'QuotaExceededError');
  },
  removeItem() {
    if (what === 'all') throw new DOMException('blocked', 'SecurityError');
  },
});

describe('storage that fails', () => {
  it.each(['get', 'set', 'all'] as const)('falls back to memory when %s throws, and says so once', (what) => {
    const reasons: string[] = [];
    const s = resolveStorage(throwing(what), (r) => reasons.push(r));
    s.set('a', '1');
    expect(s.get('a')).toBe(what === 'get' ? null : '1');
    s.set('b', '2');
    s.remove('a');
    expect(reasons).toHaveLength(1);
  });

  it('quota: the value set is kept in memory and read back', () => {
    const reasons: string[] = [];
    const s = resolveStorage(throwing('set'), (r) => reasons.push(r));
    s.set('k', 'v');
    expect(s.get('k')).toBe('v');
    expect(reasons[0]).toMatch(/QuotaExceededError/);
  });

  it('window.sessionStorage access throwing a SecurityError is memory, not a crash', () => {
    const g = globalThis as Record<string, unknown>;
    Object.defineProperty(g, 'sessionStorage', {
      configurable: true,
      get() {
        throw new DOMException('denied', 'SecurityError');
      },
    });
    try {
      expect(webStorage('sessionStorage')).toMatchObject({ storage: null, reason: expect.stringMatching(/SecurityError/) });
      const reasons: string[] = [];
      const s = resolveStorage('session', (r) => reasons.push(r));
      s.set('x', 'y');
      expect(s.get('x')).toBe('y');
      expect(reasons).toHaveLength(1);
    } finally {
      delete g.sessionStorage;
    }
  });

  it('pay() still works on a storage whose every call throws, with a storage-fallback event', async () => {
    const server = new FakeServer();
    const events: ChargerEvent[] = [];
    const c = createCharger({ endpoint: '/graphql', publishableKey: 'co_pk_1', session: 'cs_1', storage: throwing('all'), fetch: server.fetch, crossTab: false, environment: {}, onEvent: (e) => events.push(e) });
    const outcome = await c.pay({ paymentMethod: 'pm_card_visa' });
    expect(outcome.status).toBe('SUCCEEDED');
    expect(events.filter((e) => e.type === 'storage-fallback')).toHaveLength(1);
    c.close();
  });
});

describe('the record', () => {
  const now = Date.parse('2026-03-01T12:00:00Z');
  const base: AttemptRecord = { v: 1, key: 'k', scope: 's', input: { paymentMethod: 'pm' }, createdAt: now - 1, status: 'open' };

  it('an open record without expiresAt is kept however old', () => {
    expect(readRecord(JSON.stringify({ ...base, createdAt: 0 }), now)).toMatchObject({ key: 'k' });
  });

  it('a settled record past its expiresAt is ignored', () => {
    const outcome = { status: 'FAILED', key: 'k', failure: { code: 'card_declined', message: 'x' }, replayed: false };
    const r = { ...base, status: 'settled', outcome, expiresAt: '2026-03-01T11:59:59Z' };
    expect(readRecord(JSON.stringify(r), now)).toBeNull();
    expect(readRecord(JSON.stringify({ ...r, expiresAt: '2026-03-02T00:00:00Z' }), now)).toMatchObject({ status: 'settled' });
  });

  it('an open record past its expiresAt is still returned (its outcome is unknown), and marked expired', () => {
    const r = { ...base, expiresAt: '2026-03-01T11:00:00Z' };
    expect(readRecord(JSON.stringify(r), now)).toMatchObject({ key: 'k' });
    expect(expired(r, now)).toBe(true);
  });

  it('garbage is no record', () => {
    expect(readRecord('{', now)).toBeNull();
    expect(readRecord('null', now)).toBeNull();
    expect(readRecord(JSON.stringify({ ...base, v: 2 }), now)).toBeNull();
  });

  it('the storage key is scoped by session and credential, and holds no credential', () => {
    const a = recordName('cs_1', 'Bearer co_pk_a');
    expect(a).toMatch(/^chargeonce:attempt:[0-9a-f]{16}$/);
    expect(a).not.toContain('co_pk_a');
    expect(recordName('cs_1', 'Bearer co_pk_b')).not.toBe(a);
    expect(recordName('cs_2', 'Bearer co_pk_a')).not.toBe(a);
  });

  it('inputs compare as the server fingerprints them', () => {
    expect(sameInput({ paymentMethod: 'pm', orderId: '' }, { paymentMethod: 'pm' })).toBe(true);
    expect(sameInput({ amount: 1, paymentMethod: 'pm' }, { paymentMethod: 'pm', amount: 1 })).toBe(true);
    expect(sameInput({ paymentMethod: 'pm', amount: 1 }, { paymentMethod: 'pm', amount: 2 })).toBe(false);
  });

  it('two shoppers on one device never share a record', async () => {
    const storage = new MemoryStorage();
    const server = new FakeServer();
    const one = createCharger({ endpoint: '/g', publishableKey: 'co_pk_1', session: 'cs_alice', storage, fetch: server.fetch, crossTab: false, environment: {} });
    server.script = ['network', 'network', 'network'];
    const p = one.pay({ paymentMethod: 'pm' }).catch(() => {});
    await new Promise((r) => setTimeout(r, 0));
    one.close();
    await p;
    const two = createCharger({ endpoint: '/g', publishableKey: 'co_pk_1', session: 'cs_bob', storage, fetch: server.fetch, crossTab: false, environment: {} });
    expect(await two.resume()).toBeNull();
    expect(storage.map.size).toBe(1);
    two.close();
  });
});
