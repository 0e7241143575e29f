// Authorize now, capture later, in real headless Chromium against the real
// chargeonce server, its simulated provider and PostgreSQL (see
// global-setup.ts): the checkout only authorizes ("Capture later"), and the
// order's Ship order asks the shop's backend (/demo/capture, the secret key
// on the server) to capture it under one capture id, Cancel order
// (/demo/void) to void it. Each scenario asserts on the provider's captures
// and voids and on chargeonce's record of the charge, read by the test
// itself, not only on what the page says.
import type { Page } from 'playwright-core';
import { describe, expect, inject, it } from 'vitest';
import { captures, chargeCaptures, eachDemoPage, expectFinal, expectLedgerPanel, focused, keptActId, ledger, storedKey, timeline, voids, watchPath, type Row } from './page';

const skip = inject('skipReason');

/** The timeline rows of one of the shop's acts on the charge. */
const actRows = async (page: Page, field: string): Promise<Row[]> => (await timeline(page)).filter((r) => r.operation === field);

/** What the outcome's facts say, by their test ids. */
const fact = (page: Page, testid: string) => page.getByTestId(testid).textContent();

/** Authorizes with the Visa card that succeeds, capture later, and answers the attempt's key and the provider's charge. */
async function authorize(page: Page): Promise<{ key: string; providerChargeId: string }> {
  await page.getByLabel('Capture later (ship first)').check();
  await page.getByTestId('pay').click();
  await expectFinal(page, 'SUCCEEDED');
  await expectLedgerPanel(page, 1);
  const key = (await storedKey(page))!;
  const charges = await ledger(key);
  expect(charges.map((c) => [c.status, c.capture_method])).toEqual([['succeeded', 'manual']]);
  await expect(fact(page, 'capture-status')).resolves.toBe('UNCAPTURED');
  await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Authorized: $113.00');
  await expect(page.getByTestId('ledger-summary').textContent()).resolves.toBe('The card was authorized once; nothing captured yet.');
  // The session fixed the method: the choice is locked until a new checkout.
  await expect(page.getByTestId('capture-later').isDisabled()).resolves.toBe(true);
  return { key, providerChargeId: charges[0].id };
}

describe.skipIf(skip !== '')('authorize now, ship later, in Chromium', () => {
  let page: Page;
  eachDemoPage((d) => {
    page = d.page;
  });

  it('Ship order after a lost response: the retry with the same capture id gets it back (replayed), and the provider holds one capture under one key', async () => {
    await expect(page.getByTestId('order-box').isHidden()).resolves.toBe(true);
    const { key, providerChargeId } = await authorize(page);
    // Nothing was taken yet: nothing to refund, an order to ship or cancel.
    await expect(page.getByTestId('refund-box').isHidden()).resolves.toBe(true);
    const ship = page.getByRole('button', { name: 'Ship order', exact: true });
    await expect(ship.isEnabled()).resolves.toBe(true);
    await expect(page.getByRole('button', { name: 'Cancel order', exact: true }).isEnabled()).resolves.toBe(true);

    const sent = watchPath(page, '/demo/capture');
    await page.getByRole('switch', { name: 'Lose the next response' }).check();
    await ship.click();
    await page.locator('[data-testid="order-box"][data-ship="succeeded"]').waitFor({ timeout: 15_000 });
    await page.locator('[data-testid="ledger-summary"][data-captured="1"]').waitFor({ timeout: 10_000 });

    const rows = await actRows(page, 'captureCharge');
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows[0]).toMatchObject({ outcome: 'network-error' });
    const captureId = rows[0].key;
    expect(captureId).toMatch(/^[0-9a-f-]{36}$/);
    expect(captureId).not.toBe(key);
    for (const r of rows) expect(r.key, 'every try carries the same capture id').toBe(captureId);
    expect(rows.at(-1)).toMatchObject({ outcome: 'answered', status: 'SUCCEEDED', replayed: 'true' });
    // The requests themselves: the same body every time, and no key of any kind from the page.
    expect(sent.length).toBe(rows.length);
    for (const r of sent) {
      expect(r.postDataJSON()).toEqual({ captureId, chargeId: expect.any(String) });
      expect((await r.allHeaders()).authorization).toBeUndefined();
    }
    // One response only: the switch turned itself off.
    await expect(page.getByTestId('drop-next').isChecked()).resolves.toBe(false);

    // The ground truth: one capture at the provider, of the whole authorization, under one provider key; chargeonce agrees.
    const atProvider = await captures(providerChargeId);
    expect(atProvider.map((c) => ({ status: c.status, amount: c.amount, final: c.final }))).toEqual([{ status: 'succeeded', amount: 11300, final: true }]);
    expect(atProvider[0].metadata.client_idempotency_key).toBe(`demo-capture:${captureId}`);
    expect(await voids(providerChargeId)).toEqual([]);
    const charge = await chargeCaptures(key);
    expect(charge).toMatchObject({ captureStatus: 'CAPTURED', amountCaptured: 11300, amountCapturable: 0 });
    expect(charge?.captures).toHaveLength(1);

    // What the page says: shipped once, replayed, where the charge stands now.
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Order shipped: $113.00 captured');
    await expect(fact(page, 'capture-status')).resolves.toBe('CAPTURED');
    await expect(fact(page, 'amount-captured')).resolves.toBe('$113.00');
    await expect(fact(page, 'amount-capturable')).resolves.toBe('$0.00');
    await expect(page.getByTestId('ledger-summary').textContent()).resolves.toBe('The card was authorized once and captured once.');
    await expect(page.getByTestId('provider-capture').count()).resolves.toBe(1);
    await expect(page.getByTestId('order-note').textContent()).resolves.toMatch(/^Shipped: \$113\.00 captured, once\. replayed: true: the answer that was lost/);
    await expect(ship.count()).resolves.toBe(0);
    await expect(page.getByRole('button', { name: 'Cancel order', exact: true }).count()).resolves.toBe(0);
    await expect(focused(page)).resolves.toBe('order-note');
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Order shipped: $113.00 captured.');
    // The money taken may now be refunded.
    await expect(page.getByRole('button', { name: 'Refund', exact: true }).isEnabled()).resolves.toBe(true);

    // A reload shows the capture kept with the attempt, and sends nothing again.
    sent.length = 0;
    await page.reload();
    await expectFinal(page, 'SUCCEEDED');
    await page.locator('[data-testid="order-box"][data-ship="succeeded"]').waitFor();
    await expect(fact(page, 'capture-status')).resolves.toBe('CAPTURED');
    await expect(keptActId(page, 'capture')).resolves.toBe(captureId);
    expect(sent).toHaveLength(0);
    expect(await captures(providerChargeId)).toHaveLength(1);
  });

  it('Cancel order voids the authorization: one void at the provider, nothing captured, and the order cannot ship', async () => {
    const { key, providerChargeId } = await authorize(page);
    await page.getByRole('button', { name: 'Cancel order', exact: true }).click();
    await page.locator('[data-testid="order-box"][data-cancel="succeeded"]').waitFor({ timeout: 15_000 });
    await page.locator('[data-testid="ledger-summary"][data-voided="1"]').waitFor({ timeout: 10_000 });

    const rows = await actRows(page, 'voidCharge');
    expect(rows).toEqual([{ operation: 'voidCharge', outcome: 'answered', key: rows[0].key, status: 'SUCCEEDED', replayed: 'false' }]);
    expect((await voids(providerChargeId)).map((v) => v.metadata.client_idempotency_key)).toEqual([`demo-void:${rows[0].key}`]);
    expect(await captures(providerChargeId)).toEqual([]);
    await expect(chargeCaptures(key)).resolves.toMatchObject({ captureStatus: 'VOIDED', amountCaptured: 0, captures: [] });

    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Order cancelled: nothing charged');
    await expect(fact(page, 'capture-status')).resolves.toBe('VOIDED');
    await expect(page.getByTestId('ledger-summary').textContent()).resolves.toBe('The card was authorized once, then voided: nothing was taken.');
    await expect(page.getByRole('button', { name: 'Ship order', exact: true }).count()).resolves.toBe(0);
    await expect(page.getByTestId('refund-box').isHidden()).resolves.toBe(true);
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Order cancelled: nothing was charged.');
  });
});
