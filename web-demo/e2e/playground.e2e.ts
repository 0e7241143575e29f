// The GraphQL playground at /playground in real headless Chromium, with every
// request to another host refused: GraphiQL must come from the server itself
// (bundled by the demo's build), not from a CDN. The query runs through the
// GraphiQL UI with the Authorization header the server filled in.
import { chromium, type Browser, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { chromiumArgs, chromiumPath } from '../../client/e2e/env';

const baseURL = inject('baseURL');
const skip = inject('skipReason');

/** A SUCCEEDED charge with key, made over the API, for the playground to look up. */
async function charge(key: string): Promise<void> {
  const res = await fetch(`${baseURL}/graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer demo-key' },
    body: JSON.stringify({
      query: 'mutation($k:String!){chargeCard(idempotencyKey:$k,input:{amount:500,currency:"USD",paymentMethod:"pm_card_visa"}){status}}',
      variables: { k: key },
    }),
  });
  const body = (await res.json()) as { data?: { chargeCard?: { status: string } } };
  expect(body.data?.chargeCard?.status).toBe('SUCCEEDED');
}

/** The text of the Monaco editor inside selector, its lines joined. */
async function editorText(page: Page, selector: string): Promise<string> {
  return page.locator(selector).evaluate((e) => {
    const lines = [...e.querySelectorAll('.view-line')].map((l) => l.textContent ?? '');
    return lines.join('\n').replace(/\u00a0/g, ' ');
  });
}

describe.skipIf(skip !== '')('GraphQL playground in Chromium, offline', () => {
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const server = new URL(baseURL || 'http://127.0.0.1');
  /** Requests to any other host, which the route refused. */
  let refused: string[];
  /** Console errors and CSP violations. */
  let problems: string[];

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  });
  afterAll(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    refused = [];
    problems = [];
    context = await browser.newContext({ baseURL, viewport: { width: 1280, height: 800 } });
    // No network beyond the server: anything else is aborted, as offline.
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === 'data:' || url.protocol === 'blob:' || url.host === server.host) return route.continue();
      refused.push(url.href);
      return route.abort('internetdisconnected');
    });
    page = await context.newPage();
    page.on('console', (m: ConsoleMessage) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    page.on('pageerror', (e) => problems.push(e.message));
  });
  afterEach(async () => {
    await context?.close();
  });

  it('runs a query through GraphiQL with the demo key, with no network beyond the server', async () => {
    const key = `playground-${crypto.randomUUID()}`;
    await charge(key);

    const res = await page.goto('/playground');
    expect(res?.status()).toBe(200);
    const run = page.getByRole('button', { name: /Execute query/ });
    await run.waitFor({ timeout: 20_000 }).catch((err: Error) => {
      throw new Error(`GraphiQL did not load; requests to other hosts: ${JSON.stringify(refused)}; ${err.message}`);
    });

    // The headers editor holds the demo key that the server filled in.
    await expect.poll(() => editorText(page, '.graphiql-editor-tool'), { timeout: 10_000 }).toContain('"Authorization": "Bearer demo-key"');

    // Replace the operation with a chargeStatus for the key, and run it.
    const editor = page.locator('.graphiql-query-editor .monaco-editor').first();
    await editor.click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(`query { chargeStatus(idempotencyKey: "${key}") { status replayed } }`);
    await run.click();

    await expect
      .poll(() => editorText(page, '.result-window'), { timeout: 15_000 })
      .toMatch(/"status": "SUCCEEDED"[\s\S]*"replayed": true/);
    expect(refused).toEqual([]);
    expect(problems).toEqual([]);
    // And a strict Content-Security-Policy held all along: nothing but the server's own scripts.
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self';");
  });
});
