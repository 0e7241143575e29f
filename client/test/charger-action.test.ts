// The charger through customer authentication (3-D Secure), against a
// fake chargeonce: pay() → following with a nextAction → handleNextAction() → the bank → the
// return to the returnUrl with chargeonce_key → resume() → the outcome,
// with one key and one charge, whether storage kept the attempt or not.
import { describe, expect, it, vi } from 'vitest';
import { returnKeyParam } from '../src/charger.js';
import { AttemptOpenError, ChargerStateError } from '../src/errors.js';
import type { ChargerState } from '../src/types.js';
import { challengeExpiresAt, challengeUrl, chargersPerTest, FakeServer, FakeWindow, MemoryStorage } from './fakes.js';

const card = { paymentMethod: 'pm_card_visa' };
// The page never leaves in these tests: navigate goes nowhere unless a test says where.
const make = chargersPerTest({ environment: { random: () => 0.5, navigate: () => {} } });

/** The address the provider sends the shopper back to. */
const back = (key: string) => ({ search: `?order=42&${returnKeyParam}=${encodeURIComponent(key)}` });
/** The kinds the state went through, each once per stay; following while the shopper must authenticate is 'following+nextAction'. */
const kinds = (states: ChargerState[]) =>
  states.map((s) => (s.kind === 'following' && s.attempt.nextAction ? 'following+nextAction' : s.kind)).filter((k, i, all) => k !== all[i - 1]);
const ops = (server: FakeServer) => server.requests.map((r) => `${r.operationName} ${r.variables.idempotencyKey}`);

describe('customer authentication (3-D Secure)', () => {
  it('pay() → following with a nextAction and an action event; handleNextAction() navigates once the record is in storage', async () => {
    const server = new FakeServer();
    server.script = ['action'];
    const storage = new MemoryStorage();
    const stored: unknown[] = [];
    const navigate = vi.fn(() => stored.push(...[...storage.map.values()].map((v) => JSON.parse(v) as unknown)));
    const { c, events } = make(server, { storage, environment: { navigate } });
    void c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    expect(c.state).toMatchObject({ kind: 'following', attempt: { key: 'key-1', nextAction: { type: 'REDIRECT', url: challengeUrl('key-1'), expiresAt: challengeExpiresAt } } });
    expect(events.find((e) => e.type === 'action')).toEqual({ type: 'action', key: 'key-1', url: challengeUrl('key-1') });

    c.handleNextAction();

    expect(navigate).toHaveBeenCalledExactlyOnceWith(challengeUrl('key-1'));
    expect(stored).toEqual([
      expect.objectContaining({ key: 'key-1', status: 'open', scope: 'cs_test_secret', input: { ...card, checkoutSession: 'cs_test_secret' }, nextAction: expect.objectContaining({ url: challengeUrl('key-1') }) }),
    ]);
  });

  it('without navigate, handleNextAction() calls location.assign', async () => {
    const assign = vi.fn();
    vi.stubGlobal('location', { search: '', assign });
    const server = new FakeServer();
    server.script = ['action'];
    const { c } = make(server, { environment: {} });
    void c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    c.handleNextAction();
    expect(assign).toHaveBeenCalledExactlyOnceWith(challengeUrl('key-1'));
  });

  it('handleNextAction() without a nextAction to follow throws ChargerStateError and goes nowhere', async () => {
    const navigate = vi.fn();
    const { c } = make(new FakeServer(), { environment: { navigate } });
    expect(() => c.handleNextAction()).toThrow(ChargerStateError);
    expect(() => c.handleNextAction()).toThrow('handleNextAction() needs a nextAction to follow (the shopper must authenticate); the charger is idle');
    await c.pay(card);
    expect(() => c.handleNextAction()).toThrow(expect.objectContaining({ name: 'ChargerStateError', state: 'settled' }) as Error);
    c.close();
    expect(() => c.handleNextAction()).toThrow(expect.objectContaining({ state: 'closed' }) as Error);
    expect(navigate).not.toHaveBeenCalled();
  });

  it('while the shopper authenticates the attempt is polled at retryAfterMs: an authentication elsewhere settles it, with no second chargeCard', async () => {
    const server = new FakeServer();
    server.script = ['action'];
    const { c, states } = make(server);
    const paid = c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(500);
    expect(c.state).toMatchObject({ kind: 'following', checks: 1, attempt: { nextAction: { url: challengeUrl('key-1') } } });
    server.authenticated('key-1');
    await vi.advanceTimersByTimeAsync(500);
    expect(c.state.kind).toBe('following');
    expect(c.state.kind === 'following' && c.state.attempt.nextAction).toBeUndefined();
    server.finish('key-1');
    await vi.advanceTimersByTimeAsync(500);
    await expect(paid).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(ops(server)).toEqual(['ChargeCard key-1', 'ChargeStatus key-1', 'ChargeStatus key-1', 'ChargeStatus key-1']);
    expect(kinds(states)).toEqual(['sending', 'following+nextAction', 'following', 'settled']);
  });

  it('authentication_failed ends FAILED like a decline; reset() then a new key', async () => {
    const server = new FakeServer();
    server.script = ['action'];
    const { c } = make(server);
    const paid = c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    server.finish('key-1', 'FAILED', 'authentication_failed');
    await vi.advanceTimersByTimeAsync(500);
    await expect(paid).resolves.toMatchObject({ status: 'FAILED', key: 'key-1', failure: { code: 'authentication_failed' } });
    c.reset();
    await expect(c.pay(card)).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-2' });
  });

  it('while the shopper authenticates: pay() with the same input waits for the outcome, another input is refused, reset() throws', async () => {
    const server = new FakeServer();
    server.script = ['action'];
    const { c, mintKey } = make(server);
    const first = c.pay(card);
    await vi.advanceTimersByTimeAsync(0);
    expect(kinds([c.state])).toEqual(['following+nextAction']);
    const again = c.pay({ ...card });
    const err = await c.pay({ paymentMethod: 'pm_card_mastercard' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttemptOpenError);
    expect((err as AttemptOpenError).key).toBe('key-1');
    expect(() => c.reset()).toThrow(ChargerStateError);
    server.finish('key-1');
    await vi.advanceTimersByTimeAsync(500);
    await expect(first).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    await expect(again).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(server.chargeCards).toHaveLength(1);
    expect(mintKey).toHaveBeenCalledTimes(1);
  });

  it('a reload while the shopper authenticates restarts with the same key and input, shows nextAction at once, and follows it again', async () => {
    const server = new FakeServer();
    server.script = ['action'];
    const storage = new MemoryStorage();
    const first = make(server, { storage });
    void first.c.pay(card).catch(() => {});
    await vi.advanceTimersByTimeAsync(0);
    first.c.close();

    const second = make(server, { storage });
    const resumed = second.c.resume();
    await vi.advanceTimersByTimeAsync(0);
    expect(second.states[0]).toMatchObject({ kind: 'sending', attempt: { key: 'key-1', nextAction: { url: challengeUrl('key-1') } } });
    expect(second.c.state).toMatchObject({ kind: 'following', attempt: { key: 'key-1', nextAction: { url: challengeUrl('key-1') } } });
    expect(server.chargeCards.map((r) => r.variables)).toEqual([server.chargeCards[0]!.variables, server.chargeCards[0]!.variables]);
    server.finish('key-1');
    await vi.advanceTimersByTimeAsync(500);
    await expect(resumed).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(second.mintKey).not.toHaveBeenCalled();
  });
});

/**
 * The first page of a checkout: it pays, is asked to authenticate, and goes
 * to the bank (the page closes), keeping its record in storage when given.
 */
async function toTheBank(server: FakeServer, storage = new MemoryStorage()) {
  server.script = ['action'];
  const before = make(server, { storage });
  void before.c.pay(card).catch(() => {});
  await vi.advanceTimersByTimeAsync(0);
  before.c.handleNextAction();
  before.c.close();
}

describe('the return from the bank', () => {
  it('with the record in storage: resume() sends chargeCard again with its key and input, and ends with the outcome', async () => {
    const server = new FakeServer();
    const storage = new MemoryStorage();
    await toTheBank(server, storage);
    server.finish('key-1'); // the shopper authenticates there

    const after = make(server, { storage, environment: { location: back('key-1') } });
    await expect(after.c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true });
    expect(ops(server)).toEqual(['ChargeCard key-1', 'ChargeCard key-1']);
    expect(server.chargeCards[1]!.variables).toEqual(server.chargeCards[0]!.variables);
    expect(server.charges.size).toBe(1);
    expect(after.mintKey).not.toHaveBeenCalled();
  });

  it('storage lost: resume() adopts chargeonce_key, asks chargeStatus only (with the session), and ends with the outcome', async () => {
    const server = new FakeServer();
    await toTheBank(server);
    server.finish('key-1');

    const after = make(server, { storage: new MemoryStorage(), environment: { location: back('key-1') } });
    await expect(after.c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-1' });
    expect(ops(server)).toEqual(['ChargeCard key-1', 'ChargeStatus key-1']);
    expect(server.requests[1]!.variables).toEqual({ idempotencyKey: 'key-1', checkoutSession: 'cs_test_secret' });
    expect(after.mintKey).not.toHaveBeenCalled();
  });

  it('storage lost and the shopper not done: the adopted key is followed with its nextAction and without, never with chargeCard', async () => {
    const server = new FakeServer();
    await toTheBank(server);

    const navigate = vi.fn();
    const after = make(server, { storage: new MemoryStorage(), environment: { location: back('key-1'), navigate } });
    const resumed = after.c.resume();
    await vi.advanceTimersByTimeAsync(0);
    expect(after.c.state).toMatchObject({ kind: 'following', attempt: { key: 'key-1', input: null, nextAction: { url: challengeUrl('key-1') } } });
    await expect(after.c.pay(card)).rejects.toMatchObject({ name: 'AttemptOpenError', key: 'key-1' });
    after.c.handleNextAction();
    expect(navigate).toHaveBeenCalledExactlyOnceWith(challengeUrl('key-1'));
    server.authenticated('key-1');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(after.c.state.kind).toBe('following');
    expect(after.c.state.kind === 'following' && after.c.state.attempt.nextAction).toBeUndefined();
    server.finish('key-1', 'FAILED', 'authentication_failed');
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(resumed).resolves.toMatchObject({ status: 'FAILED', key: 'key-1', failure: { code: 'authentication_failed' } });
    expect(server.chargeCards).toHaveLength(1); // the first page's, only
    expect(after.mintKey).not.toHaveBeenCalled();
  });

  it('a chargeonce_key this session does not know: resume() resolves null and the charger is idle', async () => {
    const server = new FakeServer();
    const { c, mintKey } = make(server, { environment: { location: back('someone-elses-key') } });
    await expect(c.resume()).resolves.toBeNull();
    expect(c.state).toEqual({ kind: 'idle', flags: { offline: false, hidden: false, follower: false }, paused: false });
    expect(ops(server)).toEqual(['ChargeStatus someone-elses-key']);
    expect(mintKey).not.toHaveBeenCalled();
  });

  it('no record and no chargeonce_key: resume() resolves null without a request', async () => {
    const server = new FakeServer();
    const { c } = make(server, { environment: { location: { search: '?order=42' } } });
    await expect(c.resume()).resolves.toBeNull();
    expect(server.requests).toHaveLength(0);
  });

  it('reads chargeonce_key when resume() is called: the page may drop it from the address at once', async () => {
    const server = new FakeServer();
    server.charges.set('key-9', { input: {}, status: 'SUCCEEDED' });
    const location = back('key-9');
    const win = new FakeWindow(); // page events: resume() waits for them to load before it dispatches
    const { c } = make(server, { environment: { location, addEventListener: win.addEventListener, removeEventListener: win.removeEventListener } });
    const resumed = c.resume();
    location.search = '?order=42'; // history.replaceState
    await expect(resumed).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-9' });
  });

  it('reads globalThis.location when the environment has none', async () => {
    vi.stubGlobal('location', { search: `?${returnKeyParam}=key-9`, assign: () => {} });
    const server = new FakeServer();
    server.charges.set('key-9', { input: {}, status: 'SUCCEEDED' });
    const { c } = make(server, { environment: {} });
    await expect(c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key: 'key-9' });
    expect(ops(server)).toEqual(['ChargeStatus key-9']);
  });
});
