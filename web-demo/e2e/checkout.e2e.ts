// The demo checkout in real headless Chromium, against the real chargeonce
// server and PostgreSQL (see global-setup.ts). Each scenario asserts on the
// card provider's ledger, read from the simulator's API by the test itself,
// not only on what the page says.
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { chromiumArgs, chromiumPath } from './env';

const baseURL = inject('baseURL');
const skip = inject('skipReason');

interface ProviderCharge {
  id: string;
  status: 'succeeded' | 'failed';
  amount: number;
  metadata: Record<string, string>;
}

/** The provider's charges for one of chargeonce's idempotency keys. */
async function ledger(key: string): Promise<ProviderCharge[]> {
  const q = new URLSearchParams({ merchant: 'demo', client_idempotency_key: key });
  const res = await fetch(`${baseURL}/provider/v1/charges?${q}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: ProviderCharge[] }).data;
}

async function chargeStatus(key: string): Promise<string | null> {
  const res = await fetch(`${baseURL}/graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer demo-key' },
    body: JSON.stringify({ query: 'query($k:String!){chargeStatus(idempotencyKey:$k){status}}', variables: { k: key } }),
  });
  const body = (await res.json()) as { data: { chargeStatus: { status: string } | null } };
  return body.data.chargeStatus?.status ?? null;
}

async function storedKey(page: Page): Promise<string | null> {
  return page.evaluate(() => {
    const raw = sessionStorage.getItem('chargeonce-demo:attempt');
    return raw ? (JSON.parse(raw) as { key: string }).key : null;
  });
}

interface Row {
  operation: string;
  outcome: string;
  key: string;
  status: string;
  replayed: string;
}

async function timeline(page: Page): Promise<Row[]> {
  return page.getByTestId('request').evaluateAll((lis) =>
    lis.map((li) => {
      const d = (li as HTMLElement).dataset;
      return {
        operation: d.operation ?? '',
        outcome: d.outcome ?? '',
        key: d.key ?? '',
        status: d.status ?? '',
        replayed: d.replayed ?? '',
      };
    }),
  );
}

async function expectFinal(page: Page, status: 'SUCCEEDED' | 'FAILED', timeout = 15_000) {
  await page.getByTestId('result-status').filter({ hasText: status }).waitFor({ timeout });
}

/** Waits until the page's ledger panel shows n charges that took money. */
async function expectLedgerPanel(page: Page, succeeded: number) {
  await page.locator(`[data-testid="ledger-summary"][data-succeeded="${succeeded}"]`).waitFor({ timeout: 10_000 });
}

describe.skipIf(skip !== '')('demo checkout in Chromium', () => {
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  });
  afterAll(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    context = await browser.newContext({ baseURL });
    page = await context.newPage();
    await page.goto('/');
  });
  afterEach(async () => {
    await context?.close();
  });

  it('happy path, from the keyboard: pays once', async () => {
    const visa = page.getByRole('radio', { name: /4242/ });
    await expect(visa.isChecked()).resolves.toBe(true);
    await visa.focus();
    await page.keyboard.press('Tab');
    await expect(page.getByRole('button', { name: /^Pay \$113\.00$/ }).evaluate((b) => b === document.activeElement)).resolves.toBe(true);
    await page.keyboard.press('Enter');

    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('replayed').textContent()).resolves.toBe('false');
    const key = await storedKey(page);
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    await expect(page.getByTestId('attempt-key').textContent()).resolves.toBe(key);

    const charges = await ledger(key!);
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ status: 'succeeded', amount: 11300 });
    await expectLedgerPanel(page, 1);
    expect(await timeline(page)).toEqual([
      { operation: 'chargeCard', outcome: 'answered', key, status: 'SUCCEEDED', replayed: 'false' },
    ]);
  });

  it('response lost after the charge: retries with the same key, one charge, replayed: true', async () => {
    await page.getByRole('switch', { name: /Lose the next response/ }).check();
    await page.getByTestId('pay').click();

    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('replayed').textContent()).resolves.toBe('true');
    const key = await storedKey(page);
    const rows = await timeline(page);
    expect(rows).toEqual([
      { operation: 'chargeCard', outcome: 'network-error', key, status: '', replayed: '' },
      { operation: 'chargeCard', outcome: 'answered', key, status: 'SUCCEEDED', replayed: 'true' },
    ]);
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain('network error');
    // The switch loses one response only.
    await expect(page.getByTestId('drop-next').isChecked()).resolves.toBe(false);

    const charges = await ledger(key!);
    expect(charges.map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);
  });

  it('server busy: SERVICE_UNAVAILABLE is retried with the same key after retryAfterMs, one charge', async () => {
    // The first chargeCard gets chargeonce's answer for a database outage
    // (the Go tests prove the server gives it); the rest reach the server.
    const retryAfterMs = 2_000;
    const sent: { key: string; at: number }[] = [];
    await page.route('**/graphql', async (route) => {
      const body = route.request().postDataJSON() as { operationName?: string; variables?: { idempotencyKey?: string } };
      if (body.operationName !== 'ChargeCard') return route.continue();
      sent.push({ key: body.variables?.idempotencyKey ?? '', at: Date.now() });
      if (sent.length > 1) return route.continue();
      const message = 'the payment database is unavailable; nothing was charged. Retry the same request with the same idempotency key';
      return route.fulfill({
        status: 503,
        headers: { 'Retry-After': '2' },
        contentType: 'application/json',
        body: JSON.stringify({ errors: [{ message, extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs } }] }),
      });
    });
    await page.getByTestId('pay').click();

    await expectFinal(page, 'SUCCEEDED');
    // The busy answer ran nothing, so the retry is the first charge, not a replay.
    await expect(page.getByTestId('replayed').textContent()).resolves.toBe('false');
    const key = await storedKey(page);
    expect(await timeline(page)).toEqual([
      { operation: 'chargeCard', outcome: 'graphql-error', key, status: '', replayed: '' },
      { operation: 'chargeCard', outcome: 'answered', key, status: 'SUCCEEDED', replayed: 'false' },
    ]);
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain('SERVICE_UNAVAILABLE, retry after 2000 ms');
    expect(sent.map((s) => s.key)).toEqual([key, key]);
    expect(sent[1].at - sent[0].at).toBeGreaterThanOrEqual(retryAfterMs);

    expect((await ledger(key!)).map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);
  });

  it('rate limited on every try: the page says so, and Pay sends the same key again', async () => {
    const tries: string[] = [];
    await page.route('**/graphql', async (route) => {
      const body = route.request().postDataJSON() as { operationName?: string; variables?: { idempotencyKey?: string } };
      if (body.operationName !== 'ChargeCard') return route.continue();
      tries.push(body.variables?.idempotencyKey ?? '');
      if (tries.length > 4) return route.continue();
      return route.fulfill({
        status: 429,
        headers: { 'Retry-After': '1' },
        contentType: 'application/json',
        body: JSON.stringify({ errors: [{ message: 'too many requests for this merchant', extensions: { code: 'RATE_LIMITED', retryAfterMs: 100 } }] }),
      });
    });
    await page.getByTestId('pay').click();

    const pay = page.getByRole('button', { name: /same attempt/ });
    await pay.waitFor({ timeout: 20_000 });
    await expect(page.getByTestId('outcome').textContent()).resolves.toContain('The payment service is busy');
    await expect(pay.isDisabled()).resolves.toBe(false);
    await pay.click();

    await expectFinal(page, 'SUCCEEDED');
    const key = await storedKey(page);
    expect(tries).toEqual([key, key, key, key, key]);
    expect((await timeline(page)).map((r) => r.outcome)).toEqual([...Array(4).fill('graphql-error'), 'answered']);
    expect((await ledger(key!)).map((c) => c.status)).toEqual(['succeeded']);
  });

  it('double click: one charge', async () => {
    await page.getByTestId('pay').dblclick();

    await expectFinal(page, 'SUCCEEDED');
    const key = await storedKey(page);
    const rows = await timeline(page);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows.every((r) => r.key === key)).toBe(true);
    expect(await ledger(key!)).toHaveLength(1);
    await expectLedgerPanel(page, 1);
  });

  it('reload during PROCESSING: the same key is picked up and the final status appears', async () => {
    await page.getByRole('radio', { name: /Slow bank/ }).check();
    await page.getByTestId('pay').click();
    await expect(page.getByTestId('pay').isDisabled()).resolves.toBe(true);
    const key = await storedKey(page);
    expect(key).not.toBeNull();
    // Reload once the server holds the attempt as PROCESSING.
    await expect.poll(() => chargeStatus(key!), { timeout: 10_000, interval: 100 }).toBe('PROCESSING');

    await page.reload();

    await expectFinal(page, 'SUCCEEDED');
    expect(await storedKey(page)).toBe(key);
    await expect(page.getByRole('radio', { name: /Slow bank/ }).isChecked()).resolves.toBe(true);
    const rows = await timeline(page);
    expect(rows[0]).toMatchObject({ operation: 'chargeCard', outcome: 'abandoned', key });
    expect(rows.slice(1).every((r) => r.operation === 'chargeStatus' && r.key === key)).toBe(true);
    expect(rows.at(-1)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await ledger(key!)).toHaveLength(1);
    await expectLedgerPanel(page, 1);
  });

  it('decline: FAILED with the reason, and a new attempt gets a new key', async () => {
    await page.getByRole('radio', { name: /0002/ }).check();
    await page.getByTestId('pay').click();

    await expectFinal(page, 'FAILED');
    await expect(page.getByTestId('failure-reason').textContent()).resolves.toBe('Your card was declined.');
    const declinedKey = await storedKey(page);
    const declined = await ledger(declinedKey!);
    expect(declined.map((c) => c.status)).toEqual(['failed']);

    await page.getByRole('button', { name: 'Try another card' }).click();
    expect(await storedKey(page)).toBeNull();
    await page.getByRole('radio', { name: /4242/ }).check();
    await page.getByTestId('pay').click();

    await expectFinal(page, 'SUCCEEDED');
    const newKey = await storedKey(page);
    expect(newKey).not.toBe(declinedKey);
    expect((await ledger(newKey!)).map((c) => c.status)).toEqual(['succeeded']);
    expect((await timeline(page)).map((r) => r.key)).toEqual([newKey]);
  });

  it('unsafe mode + lost response: a new key per retry charges twice', async () => {
    await page.getByRole('switch', { name: /Unsafe mode/ }).check();
    await page.getByRole('switch', { name: /Lose the next response/ }).check();
    await page.getByTestId('pay').click();

    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('replayed').textContent()).resolves.toBe('false');
    const rows = await timeline(page);
    expect(rows.map((r) => r.outcome)).toEqual(['network-error', 'answered']);
    const [first, retry] = rows.map((r) => r.key);
    expect(retry).not.toBe(first);

    const charges = [...(await ledger(first)), ...(await ledger(retry))];
    expect(charges.map((c) => c.status)).toEqual(['succeeded', 'succeeded']);
    await expectLedgerPanel(page, 2);
    await page.getByTestId('charged-twice').waitFor();
  });
});
