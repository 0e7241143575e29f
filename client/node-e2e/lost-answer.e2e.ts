// A charge, a refund and a capture whose first answer is lost, through
// @chargeonce/client/server against the real server: the server runs the
// request to its end and cuts the answer (devfault's drop-response), the
// runner sends the same key again, the server replays what it did, and the
// card provider holds one charge, one refund, or one capture.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createMerchant, fileKeyStore, type RunnerEvent } from '../src/server.js';
import { atProvider, baseURL, charge, chargeRecord, endpoint, losing, merchant, secretKey, skip } from './chargeonce.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function merchantLosing(operation: string) {
  const dir = mkdtempSync(join(tmpdir(), 'chargeonce-node-e2e-'));
  dirs.push(dir);
  const events: RunnerEvent[] = [];
  const m = createMerchant({ endpoint, secretKey, store: fileKeyStore(dir), fetch: losing(operation), retry: { baseMs: 100 }, onEvent: (e) => events.push(e) });
  const stored = (name: string) => JSON.parse(readFileSync(join(dir, `${encodeURIComponent(name)}.json`), 'utf8')) as { key: string; status: string };
  return { m, events, stored };
}

/** The requests the runner made: [operation or its status query, key], and what came back. */
const requests = (events: RunnerEvent[]) =>
  events.filter((e) => e.type === 'answer').map((e) => ({ request: e.request, key: e.key, status: e.status ?? null, lost: e.reason !== undefined }));

describe.skipIf(skip !== '')('a lost answer, against the real server', () => {
  it('refundCharge: the same key again, SUCCEEDED replayed, and one refund at the provider', async () => {
    const c = await charge('AUTOMATIC', 1500);
    const { m, events, stored } = merchantLosing('RefundCharge');

    const outcome = await m.refundCharge(`refund:${c.id}`, { chargeId: c.id, reason: 'requested_by_customer' });

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: true, refund: { chargeId: c.id, amount: 1500 } });
    const sent = requests(events);
    expect(sent[0]).toMatchObject({ request: 'send', lost: true });
    expect(sent.at(-1)).toMatchObject({ request: 'send', status: 'SUCCEEDED', lost: false });
    expect(new Set(sent.map((r) => r.key))).toEqual(new Set([outcome.key]));
    expect(stored(`refund:${c.id}`)).toMatchObject({ key: outcome.key, status: 'settled' });

    const refunds = await atProvider('refunds', c.providerChargeId);
    expect(refunds.map((r) => ({ status: r.status, amount: r.amount }))).toEqual([{ status: 'succeeded', amount: 1500 }]);
    const record = await chargeRecord(c.key);
    expect(record).toMatchObject({ amountRefunded: 1500 });
    expect(record?.refunds).toHaveLength(1);
  });

  it('chargeCard server to server: the same key again, SUCCEEDED replayed, and one charge at the provider', async () => {
    const orderId = `order-${crypto.randomUUID()}`;
    const { m, events, stored } = merchantLosing('ChargeCard');

    const outcome = await m.chargeCard(`charge:${orderId}`, { paymentMethod: 'pm_card_visa', amount: 2500, currency: 'USD', orderId });

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: true, charge: { amount: 2500, orderId, captureStatus: 'CAPTURED' } });
    const sent = requests(events);
    expect(sent[0]).toMatchObject({ request: 'send', lost: true });
    expect(new Set(sent.map((r) => r.key))).toEqual(new Set([outcome.key]));
    expect(stored(`charge:${orderId}`)).toMatchObject({ key: outcome.key, status: 'settled' });

    const q = new URLSearchParams({ merchant, order_id: orderId });
    const res = await fetch(`${baseURL}/provider/v1/charges?${q}`);
    const charges = ((await res.json()) as { data: { status: string; amount: number }[] }).data;
    expect(charges.map((c) => ({ status: c.status, amount: c.amount }))).toEqual([{ status: 'succeeded', amount: 2500 }]);
  });

  it('captureCharge: the same key again, SUCCEEDED replayed, and one capture at the provider', async () => {
    const c = await charge('MANUAL', 2000);
    const { m, events } = merchantLosing('CaptureCharge');

    const outcome = await m.captureCharge(`capture:${c.id}`, { chargeId: c.id, amount: 1200, final: true });

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: true, capture: { chargeId: c.id, amount: 1200, final: true }, charge: { captureStatus: 'CAPTURED', amountCaptured: 1200 } });
    const sent = requests(events);
    expect(sent[0]).toMatchObject({ request: 'send', lost: true });
    expect(new Set(sent.map((r) => r.key))).toEqual(new Set([outcome.key]));

    const captures = await atProvider('captures', c.providerChargeId);
    expect(captures.map((x) => ({ status: x.status, amount: x.amount }))).toEqual([{ status: 'succeeded', amount: 1200 }]);
    const record = await chargeRecord(c.key);
    expect(record).toMatchObject({ captureStatus: 'CAPTURED' });
    expect(record?.captures).toHaveLength(1);
  });

  it('a settled name is answered from the store: no request, the same outcome', async () => {
    const c = await charge('AUTOMATIC', 900);
    const { m, events } = merchantLosing('RefundCharge');
    const first = await m.refundCharge(`refund:${c.id}`, { chargeId: c.id });
    const sends = events.length;

    await expect(m.refundCharge(`refund:${c.id}`, { chargeId: c.id })).resolves.toEqual(first);
    expect(events).toHaveLength(sends);
    expect(await atProvider('refunds', c.providerChargeId)).toHaveLength(1);
  });

  it('a refusal is a typed rejection: more than the charge, nothing refunded', async () => {
    const c = await charge('AUTOMATIC', 700);
    const { m } = merchantLosing('none');

    await expect(m.refundCharge(`refund:${c.id}`, { chargeId: c.id, amount: 800 })).rejects.toMatchObject({
      name: 'OperationRejectedError',
      code: 'REFUND_EXCEEDS_CHARGE',
      extensions: { refundable: 700 },
    });
    expect(await atProvider('refunds', c.providerChargeId)).toHaveLength(0);
  });
});
