import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCharger, type Charger, type ChargerOptions } from '../src/charger.js';
import { AttemptOpenError } from '../src/errors.js';
import type { ChargerEvent } from '../src/events.js';
import type { ChargerState } from '../src/types.js';
import { keyOf } from '../src/steps.js';
import { challengeUrl, FakeLocks, FakeServer, MemoryStorage } from './fakes.js';

const card = { paymentMethod: 'pm_card_visa' };
let tabs: Charger[] = [];
afterEach(() => {
  for (const t of tabs) t.close();
  tabs = [];
});

/** A tab of the same origin: its own sessionStorage, the shared locks and BroadcastChannel. */
function tab(server: FakeServer, locks: FakeLocks, over: Partial<ChargerOptions> = {}) {
  let n = 0;
  const name = `tab${tabs.length + 1}`;
  const c = createCharger({
    endpoint: '/graphql',
    publishableKey: 'co_pk_1',
    session: 'cs_shared',
    storage: new MemoryStorage(),
    live: 'poll',
    fetch: server.fetch,
    mintKey: () => `${name}-key-${++n}`,
    retry: { baseMs: 10, capMs: 20 },
    environment: { locks: locks as unknown as LockManager, BroadcastChannel: globalThis.BroadcastChannel },
    ...over,
  });
  tabs.push(c);
  return c;
}

const until = async (ok: () => boolean, ms = 2_000) => {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

/**
 * Tab a pays while the server holds its answer; tab b, paying the same
 * input, must follow a's attempt (one key, one request, the same outcome)
 * once open() lets the server answer. Returns b.
 */
async function secondTabFollows(server: FakeServer, a: ReturnType<typeof tab>, b: ReturnType<typeof tab>, open: () => void) {
  const pa = a.pay(card);
  await until(() => server.chargeCards.length === 1);
  const pb = b.pay(card);
  await until(() => keyOf(b.state) === 'tab1-key-1');
  expect(b.state.flags.follower).toBe(true);
  open();
  const [oa, ob] = await Promise.all([pa, pb]);
  expect(ob).toEqual(oa);
  expect(server.chargeCards).toHaveLength(1);
  return b;
}

/** Two tabs on one lock manager; tab a has sent its chargeCard, whose answer the server holds until open(). */
async function twoTabsOneSending() {
  const server = new FakeServer();
  const locks = new FakeLocks();
  let open!: () => void;
  server.gate = new Promise((r) => (open = r));
  const a = tab(server, locks);
  const b = tab(server, locks);
  const pa = a.pay(card);
  await until(() => server.chargeCards.length === 1);
  return { server, locks, a, b, pa, open };
}

describe('one sender per scope across tabs', () => {
  it('a second tab paying the same input follows the first: one key, one request, the same outcome', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    let open!: () => void;
    server.gate = new Promise((r) => (open = r));
    const b = await secondTabFollows(server, tab(server, locks), tab(server, locks), open);
    expect(b.state).toMatchObject({ kind: 'settled', attempt: { key: 'tab1-key-1' } });
  });

  it('the lock granted to a waiting tab after the attempt settled is released at once', async () => {
    const { server, locks, b, pa, open } = await twoTabsOneSending();
    const pb = b.pay(card);
    await until(() => keyOf(b.state) === 'tab1-key-1');
    // The settled word reaches b before the lock does, as between two real tabs.
    const release = locks.delayNextGrant();
    open();
    await Promise.all([pa, pb]);
    release();
    await new Promise((r) => setTimeout(r, 20)); // b is granted the lock, and must give it back
    expect(locks.heldNames()).toEqual([]);
    expect(server.chargeCards).toHaveLength(1);
  });

  it('another input in the second tab is refused with the first tab\'s key', async () => {
    const { server, locks, b, pa, open } = await twoTabsOneSending();
    const err = await b.pay({ paymentMethod: 'pm_card_mastercard' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttemptOpenError);
    expect((err as AttemptOpenError).key).toBe('tab1-key-1');
    open();
    await pa;
    expect(server.chargeCards).toHaveLength(1);
  });

  it('an idle tab shows another tab\'s outcome instead of paying', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    const a = tab(server, locks);
    const b = tab(server, locks);
    await a.pay(card);
    await until(() => b.state.kind === 'settled');
    expect(b.state).toMatchObject({ flags: { follower: true }, outcome: { key: 'tab1-key-1' } });
    await expect(b.pay(card)).resolves.toMatchObject({ key: 'tab1-key-1' });
    expect(server.chargeCards).toHaveLength(1);
  });

  it('a sender whose shopper authenticates keeps the lock; an idle tab shows its nextAction, and takes the shopper to the bank with the attempt in its own storage first', async () => {
    const server = new FakeServer();
    server.script = ['action'];
    const locks = new FakeLocks();
    const a = tab(server, locks);
    const storage = new MemoryStorage();
    let atNavigate: unknown[] = [];
    const navigate = vi.fn(() => (atNavigate = [...storage.map.values()].map((v) => JSON.parse(v) as unknown)));
    const b = tab(server, locks, { storage, environment: { locks: locks as unknown as LockManager, BroadcastChannel: globalThis.BroadcastChannel, navigate } });
    const pa = a.pay(card);
    await until(() => b.state.kind === 'following' && b.state.attempt.nextAction !== undefined);
    expect(a.state).toMatchObject({ kind: 'following', attempt: { nextAction: { url: challengeUrl('tab1-key-1') } } });
    expect(b.state).toMatchObject({ kind: 'following', flags: { follower: true }, attempt: { key: 'tab1-key-1', nextAction: { url: challengeUrl('tab1-key-1') } } });
    expect(locks.heldNames()).toHaveLength(1); // the sender's, held while the shopper authenticates

    b.handleNextAction();

    expect(navigate).toHaveBeenCalledExactlyOnceWith(challengeUrl('tab1-key-1'));
    expect(atNavigate).toEqual([expect.objectContaining({ key: 'tab1-key-1', status: 'open', input: { ...card, checkoutSession: 'cs_shared' } })]);
    server.finish('tab1-key-1');
    await expect(pa).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'tab1-key-1' });
    await until(() => b.state.kind === 'settled');
    expect(server.chargeCards).toHaveLength(1);
    await until(() => locks.heldNames().length === 0);
  });

  it('a tab that dies holding the lock does not block the other: it resends the same key', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    server.gate = new Promise(() => {}); // the first tab's request never answers
    const a = tab(server, locks);
    const b = tab(server, locks);
    void a.pay(card).catch(() => {});
    await until(() => server.chargeCards.length === 1);
    const pb = b.pay(card);
    await until(() => keyOf(b.state) === 'tab1-key-1');
    server.gate = null;
    a.close(); // the tab is gone: its lock with it
    await expect(pb).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'tab1-key-1' });
    expect(server.chargeCards.map((r) => r.variables.idempotencyKey)).toEqual(['tab1-key-1', 'tab1-key-1']);
    expect(server.charges.size).toBe(1);
  });

  it('with crossTab: false each charger is on its own', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    const a = tab(server, locks, { crossTab: false });
    await a.pay(card);
    expect(locks.isHeld('any')).toBe(false);
  });
});

describe('the cross-tab code loads apart', () => {
  /** A BroadcastChannel that counts the channels opened. */
  const counting = () => {
    const opened: string[] = [];
    class Channel extends BroadcastChannel {
      constructor(name: string) {
        super(name);
        opened.push(name);
      }
    }
    return { opened, Channel: Channel as typeof BroadcastChannel };
  };

  it('a charger created in a page loads it and opens the scope\'s channel, before its first pay() sends', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    const { opened, Channel } = counting();
    const a = tab(server, locks, { environment: { locks: locks as unknown as LockManager, BroadcastChannel: Channel } });
    expect(opened).toHaveLength(0); // not yet: it loads after createCharger returns
    await until(() => opened.length === 1);
    expect(opened[0]).toMatch(/^chargeonce:[0-9a-f]{16}$/);
    await expect(a.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED' });
  });

  it('a charger closed before the code loaded opens no channel and asks for no lock', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    const request = vi.spyOn(locks, 'request');
    const { opened, Channel } = counting();
    const a = tab(server, locks, { environment: { locks: locks as unknown as LockManager, BroadcastChannel: Channel } });
    const p = a.pay(card).catch((e: unknown) => e);
    a.close();
    await import('../src/crosstab.js');
    await new Promise((r) => setTimeout(r, 20));
    expect(await p).toBeInstanceOf(Error);
    expect(opened).toHaveLength(0);
    expect(request).not.toHaveBeenCalled();
    expect(server.requests).toHaveLength(0);
  });

  it('a message that is no state with an attempt (another version of the page) is ignored; the next one is heard', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    const { opened, Channel } = counting();
    const b = tab(server, locks, { environment: { locks: locks as unknown as LockManager, BroadcastChannel: Channel } });
    await until(() => opened.length === 1);
    const other = new BroadcastChannel(opened[0]!);
    other.postMessage({ from: 'old', kind: 'progress', progress: { kind: 'processing', key: 'old-key', input: card } });
    const theirs: ChargerState = {
      kind: 'following',
      attempt: { key: 'new-key', input: { ...card, checkoutSession: 'cs_shared' }, sends: 1 },
      live: 'poll',
      liveOpen: false,
      checks: 0,
      pollMs: 1_000,
      retryInMs: null,
      flags: { offline: false, hidden: false, follower: false },
      paused: false,
    };
    other.postMessage({ from: 'new', kind: 'progress', progress: theirs });
    await until(() => keyOf(b.state) === 'new-key');
    expect(b.state).toEqual({ ...theirs, flags: { ...theirs.flags, follower: true } });
    other.close();
  });

  it('with crossTab: false it opens no channel', async () => {
    const server = new FakeServer();
    const locks = new FakeLocks();
    const { opened, Channel } = counting();
    const a = tab(server, locks, { crossTab: false, environment: { locks: locks as unknown as LockManager, BroadcastChannel: Channel } });
    await a.pay(card);
    expect(opened).toHaveLength(0);
  });
});

describe('without Web Locks and BroadcastChannel', () => {
  it('a page\'s charger says so once and pays alone; a server\'s says nothing', async () => {
    const server = new FakeServer();
    const events: ChargerEvent[] = [];
    const page = tab(server, new FakeLocks(), { environment: { addEventListener: () => {}, removeEventListener: () => {} }, onEvent: (e) => events.push(e) });
    await expect(page.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'tab1-key-1' });
    expect(events.filter((e) => e.type === 'crosstab')).toEqual([{ type: 'crosstab', locks: 'none', channel: 'none' }]);

    const quiet: ChargerEvent[] = [];
    const node = tab(server, new FakeLocks(), { session: 'cs_node', environment: {}, onEvent: (e) => quiet.push(e) });
    await expect(node.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'tab2-key-1' });
    expect(quiet.filter((e) => e.type === 'crosstab')).toEqual([]);
  });
});
