// One sender per scope, with the browser's own Web Locks and
// BroadcastChannel: two chargers in one page that share storage: 'local'
// behave as two tabs of one checkout do.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChargerEnvironment, ChargerEvent } from '../src/index.js';
import { card, charger, closeChargers, FakeServer, newSession } from './fake-server.js';

beforeEach(() => localStorage.clear());
afterEach(() => {
  closeChargers();
  for (const f of document.querySelectorAll('iframe.tab')) f.remove();
});

/** The scope's sender lock, as navigator.locks reports it: who holds it, who waits. */
async function scopeLock(): Promise<{ held: number; pending: number }> {
  const q = await navigator.locks.query();
  const ours = (l: LockInfo) => l.name?.startsWith('chargeonce:') ?? false;
  return { held: (q.held ?? []).filter(ours).length, pending: (q.pending ?? []).filter(ours).length };
}

describe('two chargers of one scope', () => {
  it('paying at once in both sends one chargeCard with one key, and both get its outcome', async () => {
    const server = new FakeServer();
    const session = newSession();
    let lockAtSend: Promise<{ held: number; pending: number }> | undefined;
    const aEvents: ChargerEvent[] = [];
    const bEvents: ChargerEvent[] = [];
    const a = charger(server, { session, storage: 'local' }, aEvents);
    const b = charger(server, { session, storage: 'local' }, bEvents);
    server.script = ['processing'];
    server.onRequest = (s) => {
      if (s.operationName === 'ChargeCard') lockAtSend = scopeLock();
    };

    const both = Promise.all([a.pay(card), b.pay(card)]);
    await expect.poll(() => server.charges.size).toBe(1);
    const [key] = server.charges.keys();
    // The other one waits for the sender's word, over BroadcastChannel, instead of minting its own key.
    await expect.poll(() => [a, b].filter((c) => c.state.flags.follower && c.state.kind === 'following').length).toBe(1);
    const waiting = a.state.flags.follower ? a : b;
    expect(waiting.state).toMatchObject({ kind: 'following', attempt: { key }, flags: { follower: true } });
    expect(await lockAtSend).toEqual({ held: 1, pending: 0 });
    await expect.poll(scopeLock).toEqual({ held: 1, pending: 1 });
    server.finish(key!);

    const [oa, ob] = await both;
    expect(oa).toMatchObject({ status: 'SUCCEEDED', key });
    expect(ob).toEqual(oa);
    expect(server.chargeCards().map((s) => s.key)).toEqual([key]);
    expect((waiting === a ? aEvents : bEvents).some((e) => e.type === 'remote' && e.key === key)).toBe(true);
    expect([...aEvents, ...bEvents].filter((e) => e.type === 'crosstab')).toEqual([]); // no fallback: the real APIs were used
    // The lock is free once it is settled, even for the one that was queued for it: the next attempt can be sent.
    await expect.poll(scopeLock).toEqual({ held: 0, pending: 0 });
    const sender = waiting === a ? b : a;
    sender.reset();
    const next = await sender.pay({ ...card, paymentMethod: 'tok_mastercard' });
    expect(next.key).not.toBe(key);
    expect(server.chargeCards().map((s) => s.key)).toEqual([key, next.key]);
  });

  it('takes over when the tab holding the lock goes away: the other asks chargeStatus for its key, never chargeCard', async () => {
    const server = new FakeServer();
    const session = newSession();
    // The first charger runs as if in another tab: its lock and channel are an iframe's, which dies with it.
    const tab = await frame();
    const env: ChargerEnvironment = { locks: tab.navigator.locks, BroadcastChannel: tab.BroadcastChannel };
    const gone = charger(server, { session, storage: 'local', environment: env });
    const stays = charger(server, { session, storage: 'local' });
    server.script = ['hold']; // charged, but its answer never reaches the first tab

    void gone.pay(card).catch(() => {});
    await expect.poll(() => server.chargeCards().length).toBe(1);
    const key = server.chargeCards()[0]!.key;
    const paid = stays.pay(card);
    await expect.poll(() => stays.state).toMatchObject({ attempt: { key }, flags: { follower: true } });
    await expect.poll(scopeLock).toEqual({ held: 1, pending: 1 });

    document.querySelector('iframe.tab')!.remove(); // the tab closes: the browser frees its lock

    await expect(paid).resolves.toMatchObject({ status: 'SUCCEEDED', key });
    expect(server.chargeCards()).toHaveLength(1);
    expect(server.statusChecks().map((s) => s.key)).toEqual([key]);
  });

  it('takes over when the charger holding the lock is closed', async () => {
    const server = new FakeServer();
    const session = newSession();
    const first = charger(server, { session, storage: 'local' });
    const second = charger(server, { session, storage: 'local' });
    server.script = ['hold'];

    void first.pay(card).catch(() => {});
    await expect.poll(() => server.chargeCards().length).toBe(1);
    const key = server.chargeCards()[0]!.key;
    const paid = second.pay(card);
    await expect.poll(() => second.state).toMatchObject({ attempt: { key }, flags: { follower: true } });

    first.close();

    await expect(paid).resolves.toMatchObject({ status: 'SUCCEEDED', key });
    expect(server.chargeCards()).toHaveLength(1);
    expect(server.statusChecks().map((s) => s.key)).toEqual([key]);
  });
});

/** A same-origin iframe: a context of its own whose locks the browser frees when it is removed. */
async function frame(): Promise<Window & typeof globalThis> {
  const f = document.createElement('iframe');
  f.className = 'tab';
  f.src = 'about:blank';
  document.body.append(f);
  return f.contentWindow as Window & typeof globalThis;
}
