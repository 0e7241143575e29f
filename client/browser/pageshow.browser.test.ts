// pageshow from the back/forward cache: timers may have slept while the
// page was frozen, so an open attempt is looked at again at once.
import { afterEach, describe, expect, it } from 'vitest';
import { card, charger, closeChargers, FakeServer, newSession } from './fake-server.js';
import type { ChargerState } from '../src/types.js';

/** The key of the charger's attempt ('' while idle). */
const keyOf = (s: ChargerState) => (s.kind === 'idle' ? '' : s.attempt.key);

afterEach(() => {
  closeChargers();
  sessionStorage.clear();
});

const show = (persisted: boolean) => window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted }));

describe('pageshow', () => {
  it('sends a retrying attempt again at once, with its key, when persisted is true', async () => {
    const server = new FakeServer();
    server.script = [{ code: 'RATE_LIMITED', retryAfterMs: 20_000 }];
    const c = charger(server, { session: newSession() });
    const paid = c.pay(card);
    await expect.poll(() => c.state.kind).toBe('retrying');
    const key = keyOf(c.state);

    show(false); // a plain load is not a restore: the 20 s wait stands
    expect(server.chargeCards()).toHaveLength(1);

    show(true);
    // The listener sends synchronously: no timer has had a chance to run.
    expect(server.chargeCards().map((s) => s.key)).toEqual([key, key]);
    await expect(paid).resolves.toMatchObject({ status: 'SUCCEEDED', key });
  });

  it('asks chargeStatus at once for a PROCESSING attempt when persisted is true', async () => {
    const server = new FakeServer();
    server.script = ['processing'];
    const c = charger(server, { session: newSession() });
    const paid = c.pay(card);
    await expect.poll(() => c.state.kind).toBe('following');
    const key = keyOf(c.state);
    const asked = server.statusChecks().length;
    server.finish(key);

    show(true);

    expect(server.statusChecks()).toHaveLength(asked + 1);
    await expect(paid).resolves.toMatchObject({ status: 'SUCCEEDED', key });
  });
});
