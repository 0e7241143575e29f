// The demo checkout in real headless Chromium, against the real chargeonce
// server and PostgreSQL (see global-setup.ts). Each scenario asserts on the
// card provider's ledger, read from the simulator's API by the test itself,
// not only on what the page says.
import type { Page, Request } from 'playwright-core';
import { describe, expect, inject, it } from 'vitest';
import { chargeStatus, eachDemoPage, expectFinal, expectLedgerPanel, focused, ledger, storedKey, timeline } from './page';

/** The demo merchant's secret key in development: the page must never hold it. */
const secretKey = 'demo-key';
/** The publishable key the server seeds in development, which the page pays with. */
const publishableKey = 'co_pk_demo';

/** The chargeCard requests the page sent: their keys and the checkout session each paid. */
function chargeCardsOf(requests: Request[]): { key: string; session: string }[] {
  return requests.flatMap((r) => {
    if (!r.url().endsWith('/graphql') || r.method() !== 'POST') return [];
    const body = r.postDataJSON() as { operationName?: string; variables?: { idempotencyKey: string; input: { checkoutSession: string } } };
    if (body.operationName !== 'ChargeCard') return [];
    return [{ key: body.variables!.idempotencyKey, session: body.variables!.input.checkoutSession }];
  });
}

const skip = inject('skipReason');

describe.skipIf(skip !== '')('demo checkout in Chromium', () => {
  let page: Page;
  eachDemoPage((d) => {
    page = d.page;
  });

  it('happy path, from the keyboard: pays once, and the focus moves to the outcome', async () => {
    const visa = page.getByRole('radio', { name: /4242/ });
    await expect(visa.isChecked()).resolves.toBe(true);
    await visa.focus();
    // The capture choice, under the cards, then the switches sit between the card and Pay.
    await page.keyboard.press('Tab');
    await expect(focused(page)).resolves.toBe('capture-later');
    await page.keyboard.press('Tab');
    await expect(focused(page)).resolves.toBe('drop-next');
    await page.keyboard.press('Tab');
    await expect(focused(page)).resolves.toBe('unsafe');
    await page.keyboard.press('Tab');
    await expect(page.getByRole('button', { name: /^Pay \$113\.00$/ }).evaluate((b) => b === document.activeElement)).resolves.toBe(true);
    await page.keyboard.press('Enter');

    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('replayed').textContent()).resolves.toBe('false');
    // Pay is gone; the focus is on the outcome's heading, not lost to <body>.
    await expect(page.getByTestId('pay').isHidden()).resolves.toBe(true);
    await expect(focused(page)).resolves.toBe('outcome-title');
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Payment received: $113.00');
    // The live region says it in a few words, not the whole list of facts.
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Payment received.');
    await expect(page.getByRole('status').count()).resolves.toBe(1);
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

  it('holds no secret key: not in its HTML, its scripts or any request; it pays with the publishable key', async () => {
    const requests: Request[] = [];
    const loaded: { url: string; type: string; text: Promise<string> }[] = [];
    const frames: string[] = [];
    page.on('request', (r) => requests.push(r));
    page.on('response', (r) => {
      const type = r.request().resourceType();
      if (['document', 'script', 'stylesheet'].includes(type)) loaded.push({ url: r.url(), type, text: r.text() });
    });
    page.on('websocket', (ws) => ws.on('framesent', (f) => frames.push(String(f.payload))));
    const doc = await page.goto('/');
    const html = await doc!.text();

    // A purchase whose answer is lost: the page retries with the same key on the same session.
    await page.getByRole('switch', { name: /Lose the next response/ }).check();
    await page.getByTestId('pay').click();
    await expectFinal(page, 'SUCCEEDED');
    const key = await storedKey(page);
    expect((await ledger(key!)).map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);
    // A second purchase, a new cart: the provider loses its answer, and the page follows the live status.
    await page.getByRole('button', { name: 'Start a new checkout' }).click();
    await page.getByRole('radio', { name: /0005/ }).check();
    await page.getByTestId('pay').click();
    await expectFinal(page, 'SUCCEEDED', 30_000);

    // The page and every script it loaded.
    expect(html).toContain('<script type="module"');
    expect(html).not.toContain(secretKey);
    const scripts = loaded.filter((l) => l.type === 'script');
    expect(scripts.length).toBeGreaterThanOrEqual(1);
    for (const l of loaded) expect(await l.text, l.url).not.toContain(secretKey);
    // Every request it sent: URL, headers, body; and what it sent on the websocket.
    expect(requests.length).toBeGreaterThan(5);
    for (const r of requests) {
      const sent = `${r.url()}\n${JSON.stringify(await r.allHeaders())}\n${r.postData() ?? ''}`;
      expect(sent, r.url()).not.toContain(secretKey);
    }
    expect(frames.length).toBeGreaterThanOrEqual(1);
    for (const f of frames) expect(f).not.toContain(secretKey);
    expect(frames.find((f) => f.includes('connection_init'))).toContain(`Bearer ${publishableKey}`);
    // Every /graphql request carries the publishable key.
    const graphql = requests.filter((r) => new URL(r.url()).pathname === '/graphql');
    expect(graphql.length).toBeGreaterThanOrEqual(3);
    for (const r of graphql) expect((await r.allHeaders()).authorization, r.url()).toBe(`Bearer ${publishableKey}`);

    // Two carts, two checkout sessions: asked for by the page, created by the shop's backend.
    const sessions = requests.filter((r) => new URL(r.url()).pathname === '/demo/checkout-session');
    const carts = sessions.map((r) => r.postDataJSON() as { cartId: string; amount: number; currency: string });
    expect(carts).toHaveLength(2);
    expect(carts[0]).toMatchObject({ amount: 11300, currency: 'USD' });
    expect(carts[1].cartId).not.toBe(carts[0].cartId);
    const charges = chargeCardsOf(requests);
    expect(charges.map((c) => c.key)).toEqual([key, key, charges[2].key]);
    expect(charges[0].session).toMatch(/^cs_/);
    expect(charges[1].session).toBe(charges[0].session);
    expect(charges[2].session).not.toBe(charges[0].session);
  });

  it('response lost after the charge: retries with the same key, one charge, replayed: true', async () => {
    const requests: Request[] = [];
    page.on('request', (r) => requests.push(r));
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
    // The retry carried the key and the checkout session of the first request.
    expect(chargeCardsOf(requests)).toEqual([
      { key, session: expect.stringMatching(/^cs_/) },
      { key, session: chargeCardsOf(requests)[0].session },
    ]);

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

  it('network fails for good: Pay comes back, not stranded on "Paying…", and sends the same key', async () => {
    await page.route('**/graphql', (route) => route.abort('internetdisconnected'));
    await page.getByTestId('pay').click();

    await page.getByTestId('outcome-title').filter({ hasText: 'We could not reach the server' }).waitFor({ timeout: 30_000 });
    await expect(page.getByTestId('outcome').textContent()).resolves.toContain('Pay again: it sends the same key');
    const pay = page.getByTestId('pay');
    await expect(pay.isDisabled()).resolves.toBe(false);
    await expect(pay.textContent()).resolves.toBe('Pay $113.00 (same attempt)');
    await expect(pay.getAttribute('aria-busy')).resolves.toBe('false');
    await expect(focused(page)).resolves.toBe('outcome-title');
    const key = await storedKey(page);
    const failed = await timeline(page);
    expect(failed.map((r) => [r.operation, r.outcome, r.key])).toEqual(Array(4).fill(['chargeCard', 'network-error', key]));

    // The network is back: Pay sends the same attempt again.
    await page.unroute('**/graphql');
    await pay.click();
    await expectFinal(page, 'SUCCEEDED');
    expect(await storedKey(page)).toBe(key);
    expect((await timeline(page)).at(-1)).toMatchObject({ operation: 'chargeCard', outcome: 'answered', key, status: 'SUCCEEDED' });
    expect((await ledger(key!)).map((c) => c.status)).toEqual(['succeeded']);
  });

  it('slow card: PROCESSING while its chargeCard is open, from chargeStatus with the same key, then SUCCEEDED', async () => {
    await page.getByRole('radio', { name: /Slow bank/ }).check();
    await page.getByTestId('pay').click();

    // The bank takes 2 s (SIM_SLOW_DELAY): after a second the page asks, and shows what the server says.
    await page.locator('[data-testid="outcome"] .pill-processing').waitFor({ timeout: 5_000 });
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Payment processing');
    await expect(page.getByTestId('pay').textContent()).resolves.toBe('Processing…');
    const key = await storedKey(page);
    const meanwhile = await timeline(page);
    expect(meanwhile[0]).toMatchObject({ operation: 'chargeCard', outcome: 'pending', key });
    expect(meanwhile).toContainEqual({ operation: 'chargeStatus', outcome: 'answered', key, status: 'PROCESSING', replayed: 'false' });

    await expectFinal(page, 'SUCCEEDED');
    const rows = await timeline(page);
    // One chargeCard; the questions are reads, with the same key.
    expect(rows.filter((r) => r.operation === 'chargeCard')).toHaveLength(1);
    expect(rows.every((r) => r.key === key)).toBe(true);
    expect(rows.filter((r) => r.operation === 'chargeStatus').length).toBeGreaterThanOrEqual(1);
    expect(await ledger(key!)).toHaveLength(1);
    await expectLedgerPanel(page, 1);
  });

  it('live status unavailable (the websocket is refused): PROCESSING falls back to the countdown, second by second', async () => {
    // The page's websocket is closed before it says anything: live status
    // cannot connect, and the page polls chargeStatus as before.
    const sockets: string[] = [];
    await page.routeWebSocket('**/graphql', (ws) => {
      sockets.push(ws.url());
      ws.close({ code: 1011, reason: 'refused by the test' });
    });
    await page.reload(); // the route takes hold in a page loaded after it
    await page.getByRole('radio', { name: /0005/ }).check();
    await page.getByTestId('pay').click();

    const next = page.getByTestId('next-poll');
    await next.waitFor({ timeout: 15_000 });
    const countdownLine = await page.getByTestId('outcome').textContent();
    const asked = async () => (await timeline(page)).filter((r) => r.operation === 'chargeStatus').length;
    const before = await asked();
    // Read the countdown until the page asks chargeStatus.
    const seen: { text: string; at: number }[] = [];
    const deadline = Date.now() + 20_000;
    while ((await asked()) === before && Date.now() < deadline) {
      const text = await next.textContent({ timeout: 200 }).catch(() => null);
      if (text && text !== seen.at(-1)?.text) seen.push({ text, at: Date.now() });
      await page.waitForTimeout(50);
    }
    const askedAt = Date.now();
    expect(await asked()).toBeGreaterThan(before);
    const seconds = seen.map((s) => Number.parseInt(s.text, 10));
    // Whole seconds, one after the other, down to 1 s, then the question.
    expect(seconds.length).toBeGreaterThanOrEqual(2);
    expect(seconds.at(-1)).toBe(1);
    seconds.forEach((n, i) => i > 0 && expect(n).toBe(seconds[i - 1] - 1));
    // Each second lasts a second, and the question waits for the end of the last.
    for (let i = 2; i < seen.length; i++) expect(seen[i].at - seen[i - 1].at).toBeGreaterThanOrEqual(800);
    expect(askedAt - seen.at(-1)!.at).toBeGreaterThanOrEqual(700);

    // The page tried the live status first, and says why it polls.
    expect(sockets.length).toBeGreaterThanOrEqual(1);
    const key = await storedKey(page);
    expect(await timeline(page)).toContainEqual({ operation: 'chargeUpdated', outcome: 'unavailable', key, status: '', replayed: '' });
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain('live status unavailable: polling');
    expect(countdownLine).toContain('Live status unavailable.');
  });

  it('live status: PROCESSING follows the subscription, and the final state arrives by it, not by polling', async () => {
    // The provider loses its answer: chargeonce answers PROCESSING, and its
    // reconciler finalizes the attempt a few seconds later. The page learns
    // it from chargeUpdated (NOTIFY at the commit), not from a question.
    await page.getByRole('radio', { name: /0005/ }).check();
    await page.getByTestId('pay').click();

    // (The subscribed state may last a moment only: the reconciler's pass
    // can come right after the PROCESSING answer.)
    await expectFinal(page, 'SUCCEEDED', 30_000);
    const key = await storedKey(page);
    const rows = await timeline(page);
    expect(rows.at(-1)).toEqual({ operation: 'chargeUpdated', outcome: 'answered', key, status: 'SUCCEEDED', replayed: 'true' });
    // Whatever chargeStatus was asked (while chargeCard was still open) said PROCESSING.
    expect(rows.filter((r) => r.operation === 'chargeStatus').every((r) => r.status === 'PROCESSING')).toBe(true);
    expect(rows.filter((r) => r.operation === 'chargeUpdated')).toHaveLength(1);
    await expect(page.getByTestId('timeline').textContent()).resolves.toContain('live status: subscribed · SUCCEEDED');
    expect((await ledger(key!)).map((c) => c.status)).toEqual(['succeeded']);
    await expectLedgerPanel(page, 1);
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
    // The key is persisted before the first byte of chargeCard (after the shop's session and the charger's lock).
    await expect.poll(() => storedKey(page), { timeout: 5_000, interval: 20 }).not.toBeNull();
    const key = await storedKey(page);
    // Reload once the server holds the attempt as PROCESSING.
    await expect.poll(() => chargeStatus(key!), { timeout: 10_000, interval: 100 }).toBe('PROCESSING');

    await page.reload();

    await expectFinal(page, 'SUCCEEDED');
    expect(await storedKey(page)).toBe(key);
    await expect(page.getByRole('radio', { name: /Slow bank/ }).isChecked()).resolves.toBe(true);
    const rows = await timeline(page);
    expect(rows[0]).toMatchObject({ operation: 'chargeCard', outcome: 'abandoned', key });
    // Since the reload, the same key only. The resumed charger sends chargeCard
    // with it again, and the server never charges for it: it answers PROCESSING
    // while the first request works, or replays the stored result.
    expect(rows.slice(1).every((r) => r.key === key)).toBe(true);
    for (const r of rows.slice(1).filter((r) => r.operation === 'chargeCard' && r.outcome === 'answered')) {
      expect(r.status === 'PROCESSING' || r.replayed === 'true', JSON.stringify(r)).toBe(true);
    }
    expect(rows.at(-1)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await ledger(key!)).toHaveLength(1);
    await expectLedgerPanel(page, 1);
  });

  it('decline: FAILED with the reason, and a new attempt gets a new key, on the same checkout session', async () => {
    const requests: Request[] = [];
    page.on('request', (r) => requests.push(r));
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
    // After a decline the shopper pays the same session again: it was not paid.
    const charges = chargeCardsOf(requests);
    expect(charges.map((c) => c.key)).toEqual([declinedKey, newKey]);
    expect(charges[1].session).toBe(charges[0].session);
  });

  it('unsafe mode + lost response: a new key and a new checkout session per retry charges twice', async () => {
    const requests: Request[] = [];
    page.on('request', (r) => requests.push(r));
    await page.getByRole('switch', { name: /Unsafe mode/ }).check();
    await page.getByRole('switch', { name: /Lose the next response/ }).check();
    await page.getByTestId('pay').click();

    await expectFinal(page, 'SUCCEEDED');
    await expect(page.getByTestId('replayed').textContent()).resolves.toBe('false');
    const rows = await timeline(page);
    expect(rows.map((r) => r.outcome)).toEqual(['network-error', 'answered']);
    const [first, retry] = rows.map((r) => r.key);
    expect(retry).not.toBe(first);

    // As a checkout that takes the retry for a new order: a new cart, so a new session
    // (a new key on the same session would be refused: it is paid).
    const sent = chargeCardsOf(requests);
    expect(sent.map((c) => c.key)).toEqual([first, retry]);
    expect(sent[1].session).not.toBe(sent[0].session);

    const charges = [...(await ledger(first)), ...(await ledger(retry))];
    expect(charges.map((c) => c.status)).toEqual(['succeeded', 'succeeded']);
    await expectLedgerPanel(page, 2);
    await page.getByTestId('charged-twice').waitFor();
    // Charged twice is a stark red state, not a green "Payment received".
    await page.locator('[data-testid="outcome"].is-alarm').waitFor();
    await expect(page.getByTestId('outcome-title').textContent()).resolves.toBe('Charged 2 times for one order');
    await expect(page.getByTestId('outcome').getAttribute('class')).resolves.not.toContain('is-success');
    await expect(page.getByTestId('announce').textContent()).resolves.toBe('Payment received, but the card was charged 2 times.');
  });
});
