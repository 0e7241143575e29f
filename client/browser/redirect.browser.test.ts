// Customer authentication (3-D Secure) in a real page: the attempt is in
// sessionStorage before handleNextAction() leaves for the bank, and the
// return (the page's own address, with chargeonce_key, as the provider
// sends it) ends with the outcome under the same key: by chargeCard again
// from storage, or, with storage lost, by chargeStatus only.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { returnKeyParam } from '../src/index.js';
import { browser } from '../src/page.js';
import { card, challengeUrl, charger, closeChargers, FakeServer, newSession, records } from './fake-server.js';
import type { ChargerState } from '../src/types.js';

/** The key of the charger's attempt ('' while idle). */
const keyOf = (s: ChargerState) => (s.kind === 'idle' ? '' : s.attempt.key);

const here = location.href;
beforeEach(() => sessionStorage.clear());
afterEach(() => {
  closeChargers();
  sessionStorage.clear();
  history.replaceState(null, '', here);
});

/** Pays until the bank asks the shopper to authenticate (a nextAction), then leaves for the bank: returns the key, and the records sessionStorage held as the page left. */
async function toTheBank(server: FakeServer, session: string) {
  let atNavigate: { key: string; status: string }[] = [];
  const went: string[] = [];
  const navigate = (url: string) => {
    atNavigate = records(sessionStorage);
    went.push(url);
  };
  server.script = ['action'];
  const c = charger(server, { session, environment: { ...browser(), navigate } });
  void c.pay(card).catch(() => {});
  await expect.poll(() => c.state.kind === 'following' && c.state.attempt.nextAction !== undefined).toBe(true);
  const key = keyOf(c.state);
  c.handleNextAction();
  expect(went).toEqual([challengeUrl(key)]);
  c.close(); // the page is gone
  return { key, atNavigate };
}

/** The provider sends the shopper back to the returnUrl, with the key added. */
const comeBack = (key: string) => history.replaceState(null, '', `?order=42&${returnKeyParam}=${encodeURIComponent(key)}`);

describe('the return from the bank', () => {
  it('the attempt is in sessionStorage before the page leaves; on the return resume() sends its key again and ends with the outcome', async () => {
    const server = new FakeServer();
    const session = newSession();
    const { key, atNavigate } = await toTheBank(server, session);
    expect(atNavigate).toEqual([expect.objectContaining({ key, status: 'open' })]);
    server.finish(key); // the shopper authenticated

    comeBack(key);
    const c = charger(server, { session });
    await expect(c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key });
    expect(server.chargeCards().map((s) => s.key)).toEqual([key, key]);
    expect(records(sessionStorage)).toEqual([expect.objectContaining({ key, status: 'settled' })]);
  });

  it('with storage lost, resume() adopts chargeonce_key from the address and asks chargeStatus only', async () => {
    const server = new FakeServer();
    const session = newSession();
    const { key } = await toTheBank(server, session);
    server.finish(key);
    sessionStorage.clear(); // another profile, a private window, storage cleared

    comeBack(key);
    const c = charger(server, { session });
    await expect(c.resume()).resolves.toMatchObject({ status: 'SUCCEEDED', key });
    expect(server.chargeCards()).toHaveLength(1); // the first page's, only
    expect(server.sent.at(-1)).toEqual({ operationName: 'ChargeStatus', key });
  });
});
