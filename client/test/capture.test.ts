// A charge made with captureMethod MANUAL: it only authorizes, and the
// outcome says where its money stands (captureStatus, what was captured,
// what may be, when the authorization lapses), as a union that each status
// narrows. The method is part of the frozen input, so every retry and
// resume sends it again under the same key.
import { describe, expect, it, vi } from 'vitest';
import { AttemptOpenError } from '../src/errors.js';
import { recordName, type AttemptRecord } from '../src/record.js';
import type { Charge, Outcome } from '../src/types.js';
import { authorizationExpiresAt, chargersPerTest, FakeServer, MemoryStorage } from './fakes.js';

const manual = { paymentMethod: 'pm_card_visa', captureMethod: 'MANUAL' as const };
const make = chargersPerTest();

/** The charge of a SUCCEEDED outcome. */
function chargeOf(o: Outcome | null): Charge {
  if (o?.status !== 'SUCCEEDED') throw new Error(`not SUCCEEDED: ${JSON.stringify(o)}`);
  return o.charge;
}

/** When an open authorization lapses: the type says every open one has a time, and never a captured one. */
function lapsesAt(c: Charge): string | null {
  switch (c.captureStatus) {
    case 'UNCAPTURED':
    case 'PARTIALLY_CAPTURED':
      return c.authorizationExpiresAt;
    case 'CAPTURED':
    case 'VOIDED':
      return c.authorizationExpiresAt satisfies null;
    case 'EXPIRED':
      return null;
  }
}

describe('a MANUAL charge', () => {
  it('sends captureMethod MANUAL and settles SUCCEEDED as an open authorization: its capture status, amounts and expiry', async () => {
    const server = new FakeServer();
    const { c } = make(server);
    const outcome = await c.pay(manual);
    expect(server.chargeCards.map((r) => r.variables.input)).toEqual([
      { paymentMethod: 'pm_card_visa', captureMethod: 'MANUAL', checkoutSession: 'cs_test_secret' },
    ]);
    const charge = chargeOf(outcome);
    expect(charge).toMatchObject({ captureStatus: 'UNCAPTURED', amount: 2500, amountCaptured: 0, amountCapturable: 2500, authorizationExpiresAt });
    expect(lapsesAt(charge)).toBe(authorizationExpiresAt);
    // The settled state carries the same outcome: a page draws it from there.
    expect(c.state).toMatchObject({ kind: 'settled', outcome: { status: 'SUCCEEDED', charge: { captureStatus: 'UNCAPTURED', amountCapturable: 2500 } } });
  });

  it('an AUTOMATIC charge is CAPTURED in full: nothing capturable, no expiry', async () => {
    const server = new FakeServer();
    const { c } = make(server);
    const charge = chargeOf(await c.pay({ paymentMethod: 'pm_card_visa' }));
    expect(charge).toMatchObject({ captureStatus: 'CAPTURED', amountCaptured: 2500, amountCapturable: 0, authorizationExpiresAt: null });
    expect(lapsesAt(charge)).toBeNull();
  });

  it('a lost answer is retried with the same key and the same method: one authorization, replayed', async () => {
    const server = new FakeServer();
    server.script = ['lose-after-charge'];
    const { c } = make(server);
    const p = c.pay(manual);
    await vi.advanceTimersByTimeAsync(1_000);
    const outcome = await p;
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: true, charge: { captureStatus: 'UNCAPTURED' } });
    expect(server.chargeCards.map((r) => [r.variables.idempotencyKey, r.variables.input?.captureMethod])).toEqual([
      ['key-1', 'MANUAL'],
      ['key-1', 'MANUAL'],
    ]);
    expect(server.charges.size).toBe(1);
  });

  it('the method is part of the input: the same card without it, while the authorization is open, is another payment', async () => {
    const server = new FakeServer();
    let open!: () => void;
    server.gate = new Promise((r) => (open = r));
    const { c, mintKey } = make(server);
    const first = c.pay(manual);
    await vi.advanceTimersByTimeAsync(0);
    await expect(c.pay({ paymentMethod: 'pm_card_visa' })).rejects.toBeInstanceOf(AttemptOpenError);
    open();
    await expect(first).resolves.toMatchObject({ status: 'SUCCEEDED' });
    expect(mintKey).toHaveBeenCalledTimes(1);
    expect(server.chargeCards).toHaveLength(1);
  });

  it('a reload answers the stored authorization, with its capture status, and sends nothing', async () => {
    const server = new FakeServer();
    const storage = new MemoryStorage();
    const first = make(server, { storage });
    await first.c.pay(manual);
    first.c.close();
    const second = make(server, { storage });
    const outcome = await second.c.resume();
    expect(chargeOf(outcome)).toMatchObject({ captureStatus: 'UNCAPTURED', amountCapturable: 2500, authorizationExpiresAt });
    await expect(second.c.pay(manual)).resolves.toEqual(outcome);
    expect(server.requests).toHaveLength(1);
  });

  it('a record settled by an earlier version, its charge without a capture status, is asked again under its own key', async () => {
    const server = new FakeServer();
    const storage = new MemoryStorage();
    // What the earlier version kept: SUCCEEDED, a charge with no word of its capture.
    const seed = make(server, { storage });
    await seed.c.pay(manual);
    seed.c.close();
    const name = recordName('cs_test_secret', 'Bearer co_pk_test');
    const old = JSON.parse(storage.getItem(name)!) as AttemptRecord;
    const { captureStatus: _s, amountCaptured: _c, amountCapturable: _a, authorizationExpiresAt: _e, ...before } = chargeOf(old.outcome!);
    storage.setItem(name, JSON.stringify({ ...old, outcome: { ...old.outcome, charge: before } }));
    server.capture('key-1'); // the merchant's server captured it meanwhile

    const { c, mintKey } = make(server, { storage });
    const outcome = await c.resume();
    expect(server.chargeCards.map((r) => r.variables.idempotencyKey)).toEqual(['key-1', 'key-1']);
    expect(mintKey).not.toHaveBeenCalled();
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: 'key-1', replayed: true });
    expect(chargeOf(outcome)).toMatchObject({ captureStatus: 'CAPTURED', amountCaptured: 2500, authorizationExpiresAt: null });
    expect(chargeOf((JSON.parse(storage.getItem(name)!) as AttemptRecord).outcome!).captureStatus).toBe('CAPTURED');
  });
});
