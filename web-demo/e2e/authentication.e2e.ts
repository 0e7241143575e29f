// Customer authentication (3-D Secure) in real headless Chromium, against
// the real chargeonce server and PostgreSQL: the card that needs it, the
// simulator's challenge page on the same server, and the return to the demo
// page, which resumes. Each scenario asserts on the provider's ledger and on
// every request the pages sent, and logs both (one line per scenario).
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { repoRoot, startServer, type RunningServer } from './server';
import { accessible, charged, describeRun, eachDemoPage, expectFinal, expectLedgerPanel, focused, ledger, storedKey, timeline, watchRequests, type Sent } from './page';

const baseURL = inject('baseURL');
const skip = inject('skipReason');

const card = /3184/; // pm_card_authenticationRequired
const onChallenge = (u: URL) => u.pathname.startsWith('/provider/authenticate/');
const onShop = (u: URL) => u.pathname === '/';

/** What the scenario sent after index from: the requests of the return, say. */
const since = (sent: Sent[], from: number) => sent.slice(from);
const count = (sent: readonly Sent[], operation: string) => sent.filter((s) => s.operation === operation).length;

async function log(scenario: string, sent: readonly Sent[], key: string, base = baseURL) {
  console.log(`3-D Secure, ${scenario}: ${await describeRun(sent, await ledger(key, base))}`);
}

/**
 * Pays with the card that needs authentication, checks the page's action
 * phase, and presses Authenticate: the page is on the bank's challenge
 * page when it resolves, with the attempt's key.
 */
async function toTheBank(page: Page, base = baseURL): Promise<string> {
  await page.getByRole('radio', { name: card }).check();
  await page.getByTestId('pay').click();
  const authenticate = page.getByRole('button', { name: 'Authenticate' });
  await authenticate.waitFor({ timeout: 10_000 });
  await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Confirm the payment with your bank');
  await expect(page.getByTestId('pay').isHidden()).resolves.toBe(true);
  const key = (await storedKey(page))!;
  // The bank waits for the shopper: no money moved yet.
  expect((await ledger(key, base)).map((c) => c.status)).toEqual(['requires_action']);
  await expectLedgerPanel(page, 0);
  // data-succeeded is 0 before the page has read the provider's charges too
  // ('No charge at the provider for this attempt.'): wait for the ledger.
  await page.getByTestId('ledger-summary').filter({ hasText: 'waits for the shopper to authenticate' }).waitFor({ timeout: 10_000 });
  await expect(page.getByTestId('ledger-summary').textContent()).resolves.toContain('waits for the shopper to authenticate');
  expect((await timeline(page))[0]).toMatchObject({ operation: 'chargeCard', outcome: 'answered', key, status: 'PROCESSING', nextAction: 'REDIRECT' });
  await authenticate.click();
  await page.waitForURL(onChallenge);
  return key;
}

/** Presses a button of the challenge page; resolves on the return, with the address the bank sent the page back to. */
async function press(page: Page, button: 'Complete authentication' | 'Fail authentication'): Promise<URL> {
  let back: URL | null = null;
  const seen = (frame: { url(): string }) => {
    const u = new URL(frame.url());
    if (onShop(u) && u.searchParams.has('chargeonce_key')) back ??= u;
  };
  page.on('framenavigated', seen);
  await page.getByRole('button', { name: button }).click();
  await page.waitForURL(onShop);
  page.off('framenavigated', seen);
  expect(back, 'the bank sent the page back with chargeonce_key').not.toBeNull();
  return back!;
}

describe.skipIf(skip !== '')('customer authentication (3-D Secure) in Chromium', () => {
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let sent: Sent[];
  eachDemoPage(
    (d) => {
      ({ browser, context, page } = d);
    },
    { beforeGoto: (c, p) => (sent = watchRequests(c, p)) },
  );

  it('complete: the page asks, the shopper authenticates at the bank, the return resumes: SUCCEEDED, one charge', async () => {
    await page.getByRole('radio', { name: card }).check();
    await page.getByTestId('pay').click();
    const authenticate = page.getByRole('button', { name: 'Authenticate' });
    await authenticate.waitFor({ timeout: 10_000 });
    // The page does not leave by itself: the shopper reads, then presses. The focus is on what to read.
    await expect(focused(page)).resolves.toBe('outcome-title');
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Your bank asks you to authenticate this payment.');
    await expect(page.getByTestId('action-expires').textContent()).resolves.toMatch(/^\d{1,2}:\d{2}\s?[AP]M$/);
    expect(new URL(page.url()).pathname).toBe('/');
    await expect(accessible(page, '#authenticate')).resolves.toEqual({
      role: 'button',
      name: 'Authenticate',
      description: 'Confirm the payment with your bank',
    });
    await expect(page.getByRole('status').count()).resolves.toBe(1);
    await page.keyboard.press('Tab');
    await expect(focused(page)).resolves.toBe('authenticate');
    await page.keyboard.press('Enter');
    await page.waitForURL(onChallenge);
    const key = (await storedKey(page))!;
    const before = sent.length;

    const back = await press(page, 'Complete authentication');
    expect(back.searchParams.get('chargeonce_key')).toBe(key);
    expect(back.searchParams.get('cart')).toMatch(/^cart_/);

    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Payment received: $113.00');
    await expect(focused(page)).resolves.toBe('outcome-title');
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Payment received.');
    // resume() read the key; the address no longer carries it.
    expect(new URL(page.url()).search).toBe('');
    expect(await storedKey(page)).toBe(key);
    expect((await ledger(key)).map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);

    const rows = await timeline(page);
    const steps = rows.map((r) => r.operation);
    expect(steps.slice(0, 1)).toEqual(['chargeCard']);
    expect(steps.indexOf('redirect')).toBeGreaterThan(0);
    expect(steps.indexOf('return')).toBe(steps.indexOf('redirect') + 1);
    expect(rows.find((r) => r.operation === 'return')).toMatchObject({ key, outcome: 'returned' });
    expect(rows[0]).toMatchObject({ operation: 'chargeCard', status: 'PROCESSING', nextAction: 'REDIRECT' });
    // The live status the page had open when it left: ended, not lost.
    expect(rows.slice(0, steps.indexOf('redirect')).filter((r) => r.operation === 'chargeUpdated').map((r) => r.outcome)).toEqual(['abandoned']);
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain('live status: ended, the page went to the bank');
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain("the attempt from this tab's storage");
    expect(rows.at(-1)).toMatchObject({ key, status: 'SUCCEEDED' });
    expect(rows.every((r) => r.key === key)).toBe(true);
    // The return sends the stored attempt again (its key, its card): the server reads the provider, never charges again.
    const returned = since(sent, before);
    expect(returned.every((s) => s.key === key)).toBe(true);
    expect(count(returned, 'chargeCard')).toBeGreaterThanOrEqual(1);
    await log('complete', sent, key);
  });

  it('the network drops the first answer on the return: the same key again, SUCCEEDED, one charge', async () => {
    const key = await toTheBank(page);
    // The first request after the return reaches the server, which acts; its answer is cut (the demo's fault).
    let dropped = 0;
    await context.route('**/graphql', (route) => {
      if (route.request().method() !== 'POST' || dropped++ > 0) return route.continue();
      return route.continue({ headers: { ...route.request().headers(), 'x-chargeonce-fault': 'drop-response' } });
    });
    const before = sent.length;
    await press(page, 'Complete authentication');

    await expectFinal(page, 'SUCCEEDED');
    const returned = since(sent, before);
    expect(await returned[0].ended).toBe('network error');
    expect(returned.every((s) => s.key === key)).toBe(true);
    const rows = await timeline(page);
    expect(rows.find((r) => r.operation === 'return')).toBeDefined();
    expect(rows.some((r) => r.outcome === 'network-error')).toBe(true);
    expect(rows.at(-1)).toMatchObject({ key, status: 'SUCCEEDED' });
    expect((await ledger(key)).map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);
    await log('network drops on the return', sent, key);
  });

  it('reload on the return page: the same key, SUCCEEDED, one charge; a reload after it asks nothing', async () => {
    const key = await toTheBank(page);
    await press(page, 'Complete authentication');
    await page.reload();

    await expectFinal(page, 'SUCCEEDED');
    expect(await storedKey(page)).toBe(key);
    expect(new URL(page.url()).search).toBe('');
    expect((await ledger(key)).map((c) => c.status)).toEqual(['succeeded']);
    // Settled and stored: a reload shows it without a request.
    const settled = sent.length;
    await page.reload();
    await expectFinal(page, 'SUCCEEDED');
    await expectLedgerPanel(page, 1);
    expect(since(sent, settled)).toEqual([]);
    expect((await timeline(page)).every((r) => r.key === key)).toBe(true);
    await log('reload on the return page', sent, key);
  });

  it('back button after success: the challenge page says it is over, the shop shows the stored outcome, nothing is sent', async () => {
    const key = await toTheBank(page);
    await press(page, 'Complete authentication');
    await expectFinal(page, 'SUCCEEDED');
    const paid = await ledger(key);
    const after = sent.length;

    await page.goBack(); // the challenge page
    expect(onChallenge(new URL(page.url()))).toBe(true);
    await page.getByText('This payment no longer waits for authentication: it succeeded.').waitFor();
    await page.goBack(); // the checkout the shopper left for the bank
    expect(onShop(new URL(page.url()))).toBe(true);
    await expectFinal(page, 'SUCCEEDED');
    await page.goForward();
    // The challenge page's own way back: its link carries chargeonce_key again.
    await page.getByRole('link', { name: 'Return to the shop' }).click();
    await page.waitForURL(onShop);
    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('replayed').textContent()).resolves.toBeDefined();
    expect(new URL(page.url()).search).toBe('');

    // Not one chargeCard or chargeStatus since the outcome arrived, and the ledger is as it was.
    expect(since(sent, after).filter((s) => s.operation !== 'chargeUpdated')).toEqual([]);
    expect(await ledger(key)).toEqual(paid);
    expect(charged(paid)).toBe(1);
    await log('back button after success', sent, key);
  });

  it('fail: FAILED authentication_failed, nothing charged', async () => {
    const key = await toTheBank(page);
    await press(page, 'Fail authentication');

    await expectFinal(page, 'FAILED');
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Authentication failed');
    await expect(page.getByTestId('outcome').textContent()).resolves.toContain('authentication_failed');
    await expect(page.getByTestId('announce').textContent()).resolves.toMatch(/^Authentication failed: /);
    const charges = await ledger(key);
    expect(charges.map((c) => [c.status, c.failure_code])).toEqual([['failed', 'authentication_failed']]);
    expect(charged(charges)).toBe(0);
    await expectLedgerPanel(page, 0);
    // Another card is a new attempt, with a new key.
    await page.getByRole('button', { name: 'Try another card' }).click();
    expect(await storedKey(page)).toBeNull();
    await log('fail', sent, key);
  });

  it('storage lost on the challenge page: resume() takes the key from chargeonce_key and only asks; SUCCEEDED, one charge', async () => {
    const key = await toTheBank(page);
    await page.evaluate(() => sessionStorage.clear());
    const before = sent.length;
    await press(page, 'Complete authentication');

    // Asked only by chargeStatus with the session, which reads the provider
    // (at most once a second per attempt): well before the reconciler's next
    // look (AUTHENTICATION_CHECK_INTERVAL, 15 s).
    await expectFinal(page, 'SUCCEEDED', 10_000);
    expect(new URL(page.url()).search).toBe('');
    const returned = since(sent, before);
    // Without the stored input, the key is never sent to chargeCard: chargeStatus only.
    expect(count(returned, 'chargeCard')).toBe(0);
    expect(count(returned, 'chargeStatus')).toBeGreaterThanOrEqual(1);
    expect(returned.every((s) => s.key === key)).toBe(true);
    const rows = await timeline(page);
    expect(rows[0]).toMatchObject({ operation: 'return', key, outcome: 'returned' });
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain("this tab's storage lost the attempt");
    expect(rows.at(-1)).toMatchObject({ operation: 'chargeStatus', key, status: 'SUCCEEDED' });
    // The card of a key from the address is not known here.
    await expect(page.getByRole('radio', { name: card }).isChecked()).resolves.toBe(false);
    expect((await ledger(key)).map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);
    await log('storage lost on the challenge page', sent, key);
  });

  it('the return URL opened in a fresh browser context: the outcome from chargeonce_key, chargeStatus only, one charge', async () => {
    const key = await toTheBank(page);
    const back = await press(page, 'Complete authentication');
    await expectFinal(page, 'SUCCEEDED');

    const fresh = await browser.newContext({ baseURL });
    try {
      const other = await fresh.newPage();
      const otherSent = watchRequests(fresh, other);
      await other.goto(back.pathname + back.search);
      await expectFinal(other, 'SUCCEEDED');
      expect(count(otherSent, 'chargeCard')).toBe(0);
      expect(count(otherSent, 'chargeStatus')).toBeGreaterThanOrEqual(1);
      expect(otherSent.every((s) => s.key === key)).toBe(true);
      expect(new URL(other.url()).search).toBe('');
      expect((await ledger(key)).map((c) => c.status)).toEqual(['succeeded']);
      await log('the return URL in a fresh context', otherSent, key);
    } finally {
      await fresh.close();
    }
  });
});

describe.skipIf(skip !== '')('customer authentication abandoned (a server of its own: AUTHENTICATION_WINDOW=3s)', () => {
  let server: RunningServer;
  let page: Page;
  let sent: Sent[];

  beforeAll(async () => {
    // Its own data directory, hence its own PostgreSQL: its fast reconciler
    // must not cancel or settle the attempts of the other tests' server.
    server = await startServer(
      {
        DATA_DIR: join(repoRoot, '.data', 'web-e2e-abandon'),
        AUTHENTICATION_WINDOW: '3s',
        AUTHENTICATION_CHECK_INTERVAL: '500ms',
        RECONCILE_INTERVAL: '500ms',
      },
      'server-abandon',
    );
  });
  afterAll(async () => {
    await server?.stop();
  });
  eachDemoPage(
    (d) => {
      page = d.page;
    },
    { url: () => server.url, beforeGoto: (c, p) => (sent = watchRequests(c, p)) },
  );

  it('the shopper never authenticates: the payment is cancelled, FAILED authentication_abandoned, nothing charged', async () => {
    const key = await toTheBank(page, server.url);
    // The shopper leaves the bank's page open; the window ends and the reconciler cancels at the provider.
    await expect.poll(async () => (await ledger(key, server.url)).map((c) => c.status), { timeout: 15_000, interval: 250 }).toEqual(['canceled']);
    await page.reload();
    await page.getByText(/This payment no longer waits for authentication: it was cancelled/).waitFor();
    await page.getByRole('link', { name: 'Return to the shop' }).click();

    await expectFinal(page, 'FAILED');
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Payment cancelled: not authenticated in time');
    await expect(page.getByTestId('outcome').textContent()).resolves.toContain('authentication_abandoned');
    const charges = await ledger(key, server.url);
    expect(charges.map((c) => [c.status, c.failure_code])).toEqual([['canceled', 'authentication_abandoned']]);
    expect(charged(charges)).toBe(0);
    await expectLedgerPanel(page, 0);
    await expect(page.getByTestId('ledger-summary').textContent()).resolves.toBe('No money moved: the payment was cancelled.');
    await log('abandoned at the bank', sent, key, server.url);
  });

  it('the shopper stays on the checkout and never presses Authenticate: the page hears the cancel by itself', async () => {
    await page.getByRole('radio', { name: card }).check();
    await page.getByTestId('pay').click();
    await page.getByRole('button', { name: 'Authenticate' }).waitFor({ timeout: 10_000 });
    const key = (await storedKey(page))!;

    await expectFinal(page, 'FAILED', 20_000);
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Payment cancelled: not authenticated in time');
    await expect(page.getByRole('button', { name: 'Authenticate' }).isHidden()).resolves.toBe(true);
    expect(count(sent, 'chargeCard')).toBe(1); // the page only read after the first answer
    const charges = await ledger(key, server.url);
    expect(charges.map((c) => c.status)).toEqual(['canceled']);
    expect(charged(charges)).toBe(0);
    await log('abandoned on the checkout', sent, key, server.url);
  });
});
