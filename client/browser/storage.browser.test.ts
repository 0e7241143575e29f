// The attempt record in the browser's own sessionStorage and localStorage,
// and storage that throws (a full quota, a SecurityError on access): the
// charger falls back to memory, says so once, and pay() still resolves.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChargerEvent } from '../src/index.js';
import { FakeServer } from '../test/fake-chargeonce.js';
import { card, charger, closeChargers, newSession, records } from './chargers.js';

beforeEach(() => {
  sessionStorage.clear();
  localStorage.clear();
});
afterEach(closeChargers);

describe('web storage', () => {
  it('persists the key in sessionStorage before chargeCard is sent, and settles it there', async () => {
    const server = new FakeServer();
    const atSend: { key: string; status: string }[][] = [];
    server.onRequest = () => atSend.push(records(sessionStorage));
    const c = charger(server, { session: newSession() });

    const outcome = await c.pay(card);

    const [sent] = server.chargeCards;
    expect(atSend[0]).toEqual([expect.objectContaining({ key: sent!.key, status: 'open' })]);
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: sent!.key });
    expect(records(sessionStorage)).toEqual([expect.objectContaining({ key: sent!.key, status: 'settled' })]);
    expect(records(localStorage)).toEqual([]);
  });

  it("keeps storage: 'local' records in localStorage only", async () => {
    const server = new FakeServer();
    const c = charger(server, { session: newSession(), storage: 'local' });

    const outcome = await c.pay(card);

    expect(records(localStorage)).toEqual([expect.objectContaining({ key: outcome.key, status: 'settled' })]);
    expect(records(sessionStorage)).toEqual([]);
  });

  it('resumes with the same key after a reload: a new charger reads the open record from sessionStorage', async () => {
    const server = new FakeServer();
    const session = newSession();
    server.script = ['hold'];
    const before = charger(server, { session });
    void before.pay(card).catch(() => {});
    await expect.poll(() => server.chargeCards.length).toBe(1);
    before.close(); // the page goes away with the answer still on its way
    await expect.poll(async () => (await navigator.locks.query()).held ?? []).toEqual([]); // and its sender lock with it

    const after = charger(server, { session });
    const outcome = await after.resume();

    const keys = server.chargeCards.map((s) => s.key);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: keys[0], replayed: true });
  });
});

describe('storage that throws', () => {
  it('falls back to memory when sessionStorage is full mid-payment, with one storage-fallback event', async () => {
    const server = new FakeServer();
    const events: ChargerEvent[] = [];
    const c = charger(server, { session: newSession() }, events);
    fill(sessionStorage); // after createCharger's probe: the record's own write is what fails
    try {
      const outcome = await c.pay(card);

      expect(outcome.status).toBe('SUCCEEDED');
      const fallbacks = events.filter((e) => e.type === 'storage-fallback');
      expect(fallbacks).toEqual([{ type: 'storage-fallback', reason: expect.stringMatching(/^setItem failed: QuotaExceededError/) }]);
      expect(records(sessionStorage)).toEqual([]);
      // In memory it still holds: the same input again is the stored outcome, not a second charge.
      await expect(c.pay(card)).resolves.toEqual(outcome);
      expect(server.chargeCards).toHaveLength(1);
    } finally {
      sessionStorage.clear();
    }
  });

  it('falls back to memory when localStorage is full from the start', async () => {
    fill(localStorage);
    try {
      const server = new FakeServer();
      const events: ChargerEvent[] = [];
      const c = charger(server, { session: newSession(), storage: 'local' }, events);

      await expect(c.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED' });
      expect(events.filter((e) => e.type === 'storage-fallback')).toEqual([
        { type: 'storage-fallback', reason: expect.stringMatching(/^localStorage unavailable: QuotaExceededError/) },
      ]);
    } finally {
      localStorage.clear();
    }
  });

  it('falls back to memory when reading sessionStorage throws a SecurityError (storage blocked)', async () => {
    const own = Object.getOwnPropertyDescriptor(window, 'sessionStorage')!;
    Object.defineProperty(window, 'sessionStorage', {
      configurable: true,
      get() {
        throw new DOMException("Failed to read the 'sessionStorage' property from 'Window': Access is denied for this document.", 'SecurityError');
      },
    });
    try {
      const server = new FakeServer();
      const events: ChargerEvent[] = [];
      const c = charger(server, { session: newSession() }, events);

      await expect(c.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED' });
      expect(events.filter((e) => e.type === 'storage-fallback')).toEqual([
        { type: 'storage-fallback', reason: expect.stringMatching(/^sessionStorage unavailable: SecurityError/) },
      ]);
      expect(server.chargeCards).toHaveLength(1);
    } finally {
      Object.defineProperty(window, 'sessionStorage', own);
    }
  });
});

/** Fills s up to its quota, until even one more character is refused. */
function fill(s: Storage): void {
  let chunk = 'x'.repeat(1 << 20);
  let i = 0;
  while (chunk.length > 0) {
    try {
      s.setItem(`fill:${i++}`, chunk);
    } catch (err) {
      if (!(err instanceof DOMException) || err.name !== 'QuotaExceededError') throw err;
      chunk = chunk.slice(0, chunk.length >> 1);
    }
  }
}
