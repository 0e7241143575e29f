// The ledger's Refund in real headless Chromium, against the real chargeonce
// server and PostgreSQL (see global-setup.ts): the page asks the shop's
// backend (/demo/refund, the secret key on the server) to refund the charge
// it paid, under one refund id. Each scenario asserts on the card
// provider's refunds and on chargeonce's record of the charge, read by the
// test itself, not only on what the page says.
import type { Page } from 'playwright-core';
import { describe, expect, inject, it } from 'vitest';
import { accessible, chargeRefunds, eachDemoPage, expectFinal, expectLedgerPanel, focused, keptActId, ledger, refunds, type Row, storedKey, timeline, watchPath } from './page';

const skip = inject('skipReason');

/** The refund rows of the page's timeline. */
const refundRows = async (page: Page): Promise<Row[]> => (await timeline(page)).filter((r) => r.operation === 'refundCharge');

/** Pays with the Visa card that succeeds, and answers the attempt's key and the provider's charge. */
async function pay(page: Page): Promise<{ key: string; providerChargeId: string }> {
  await page.getByTestId('pay').click();
  await expectFinal(page, 'SUCCEEDED');
  await expectLedgerPanel(page, 1);
  const key = (await storedKey(page))!;
  const charges = await ledger(key);
  expect(charges.map((c) => c.status)).toEqual(['succeeded']);
  return { key, providerChargeId: charges[0].id };
}

/** Waits until the refund is over, as the page shows it. */
async function refunded(page: Page) {
  await page.locator('[data-testid="refund-box"][data-state="succeeded"]').waitFor({ timeout: 15_000 });
  await page.locator('[data-testid="ledger-summary"][data-refunded="1"]').waitFor({ timeout: 10_000 });
}

/** What the provider and chargeonce hold afterwards: one refund of the whole charge, the same in both. */
async function expectOneRefund(key: string, providerChargeId: string) {
  const atProvider = await refunds(providerChargeId);
  expect(atProvider.map((r) => ({ status: r.status, amount: r.amount }))).toEqual([{ status: 'succeeded', amount: 11300 }]);
  const charge = await chargeRefunds(key);
  expect(charge?.amountRefunded).toBe(11300);
  expect(charge?.refunds).toHaveLength(1);
}

describe.skipIf(skip !== '')('the ledger refund in Chromium', () => {
  let page: Page;
  eachDemoPage((d) => {
    page = d.page;
  });

  it('response lost after the refund: a retry with the same refund id gets it back (replayed), and the card is refunded once', async () => {
    // Nothing to refund before the charge.
    await expect(page.getByTestId('refund-box').isHidden()).resolves.toBe(true);
    const { key, providerChargeId } = await pay(page);
    const refund = page.getByRole('button', { name: 'Refund', exact: true });
    await expect(refund.isEnabled()).resolves.toBe(true);
    await expect(accessible(page, '#refund')).resolves.toMatchObject({ role: 'button', name: 'Refund' });
    await expect(accessible(page, '#refund').then((a) => a.description)).resolves.toMatch(/^Refunds \$113\.00 in full through the shop's backend/);

    const sent = watchPath(page, '/demo/refund');
    await page.getByRole('switch', { name: 'Lose the next response' }).check();
    await refund.click();
    await refunded(page);

    const rows = await refundRows(page);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(rows[0]).toMatchObject({ outcome: 'network-error' });
    const refundId = rows[0].key;
    expect(refundId).toMatch(/^[0-9a-f-]{36}$/);
    expect(refundId).not.toBe(key);
    for (const r of rows) expect(r.key, 'every try carries the same refund id').toBe(refundId);
    expect(rows.some((r) => r.status === 'SUCCEEDED' && r.replayed === 'true')).toBe(true);
    expect(rows.at(-1)).toMatchObject({ outcome: 'answered', status: 'SUCCEEDED', replayed: 'true' });
    // The requests themselves: the same body every time, and no key of any kind from the page.
    expect(sent.length).toBe(rows.length);
    for (const r of sent) {
      expect(r.postDataJSON()).toEqual({ refundId, chargeId: expect.any(String) });
      expect((await r.allHeaders()).authorization).toBeUndefined();
    }
    // One response only: the switch turned itself off.
    await expect(page.getByTestId('drop-next').isChecked()).resolves.toBe(false);

    await expectOneRefund(key, providerChargeId);
    await expect(page.getByTestId('ledger-summary').textContent()).resolves.toBe('The card was charged once and refunded once.');
    await expect(page.getByTestId('provider-refund').evaluateAll((lis) => lis.map((li) => (li as HTMLElement).dataset.status))).resolves.toEqual([
      'succeeded',
    ]);
    // Fully refunded: the button is gone, its note has the focus and says why, and the live region says it in a few words.
    await expect(refund.count()).resolves.toBe(0);
    await expect(focused(page)).resolves.toBe('refund-note');
    await expect(page.getByTestId('refund-note').textContent()).resolves.toMatch(/^Refunded \$113\.00: nothing remains to refund\. replayed: true/);
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Refunded $113.00.');

    // A reload shows the refund kept with the attempt, and sends nothing again.
    sent.length = 0;
    await page.reload();
    await expectFinal(page, 'SUCCEEDED');
    await page.locator('[data-testid="refund-box"][data-state="succeeded"]').waitFor();
    await expect(keptActId(page, 'refund')).resolves.toBe(refundId);
    await expect(refund.count()).resolves.toBe(0);
    expect(sent).toHaveLength(0);
    await expectOneRefund(key, providerChargeId);
  });

  it('no fault, from the keyboard: one request, replayed false, refunded once', async () => {
    const { key, providerChargeId } = await pay(page);
    await page.getByRole('button', { name: 'Refund', exact: true }).focus();
    await page.keyboard.press('Enter');
    await refunded(page);

    const rows = await refundRows(page);
    expect(rows).toEqual([{ operation: 'refundCharge', outcome: 'answered', key: rows[0].key, status: 'SUCCEEDED', replayed: 'false' }]);
    await expectOneRefund(key, providerChargeId);
    await expect(page.getByTestId('ledger-summary').textContent()).resolves.toBe('The card was charged once and refunded once.');
    await expect(focused(page)).resolves.toBe('refund-note');
    await expect(page.getByTestId('refund-note').textContent()).resolves.toBe('Refunded $113.00: nothing remains to refund.');
  });
});
