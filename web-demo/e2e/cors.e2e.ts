// A shop's checkout page on another origin than chargeonce, in real
// Chromium: two loopback ports are two origins. The page on the origin the
// demo merchant registered (merchant origins add) pays a checkout session
// with the publishable key and reads the answer; a page on an unregistered
// origin cannot, and neither can a page that sends the secret key, on any
// origin: chargeonce allows no cross-origin read of a secret key's answer.
// The session is created on the Node side, as a shop's backend does.
import { createServer, type Server } from 'node:http';
import { chromium, type Browser, type BrowserContext, type Page, type Response } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { chromiumArgs, chromiumPath } from '../../client/e2e/env';
import { ledger } from './page';
import { freePort, runCLI } from './server';

const baseURL = inject('baseURL');
const skip = inject('skipReason');

/** A shop's static page on its own port: another origin than chargeonce's. */
async function startShop(): Promise<{ origin: string; close(): Promise<void> }> {
  const port = await freePort();
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
    res.end('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Another shop</title></head><body><h1>Checkout</h1></body></html>');
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', ok);
  });
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise((ok) => server.close(() => ok())) };
}

interface Session {
  clientSecret: string;
  publishableKey: string;
}

/** What a shop's backend does: a checkout session for a new cart, from the server side. */
async function createSession(): Promise<Session> {
  const res = await fetch(`${baseURL}/demo/checkout-session`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ cartId: `cors-cart-${crypto.randomUUID()}`, amount: 2500, currency: 'USD' }),
  });
  expect(res.status).toBe(200);
  const s = (await res.json()) as Session & { status: string };
  expect(s.status).toBe('OPEN');
  return s;
}

/** What the page's fetch ended with: the answer it could read, or the error it threw. */
type PageFetch = { status: number; body: unknown } | { error: string; message: string };

/** Runs fetch in the page: a POST of a GraphQL request to chargeonce's /graphql. */
function fetchFromPage(page: Page, authorization: string, query: string, variables: Record<string, unknown>): Promise<PageFetch> {
  return page.evaluate(
    async ({ url, authorization, query, variables }) => {
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: authorization },
          body: JSON.stringify({ query, variables }),
        });
        return { status: res.status, body: await res.json() };
      } catch (e) {
        return { error: (e as Error).name, message: (e as Error).message };
      }
    },
    { url: `${baseURL}/graphql`, authorization, query, variables },
  );
}

const chargeCard = 'mutation($k:String!,$i:ChargeCardInput!){chargeCard(idempotencyKey:$k,input:$i){status replayed charge{amount}}}';
const chargeStatus = 'query($k:String!){chargeStatus(idempotencyKey:$k){status}}';

describe.skipIf(skip !== '')('cross-origin checkout pages in Chromium (CORS)', () => {
  let browser: Browser;
  let registered: Awaited<ReturnType<typeof startShop>>;
  let unregistered: Awaited<ReturnType<typeof startShop>>;
  let context: BrowserContext;
  let page: Page;
  /** The answers from chargeonce's /graphql that the page could read (a blocked one is a failed request). */
  let answers: Response[];

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
    registered = await startShop();
    unregistered = await startShop();
    expect(runCLI(['merchant', 'origins', 'add', 'demo', registered.origin])).toContain(registered.origin);
  });
  afterAll(async () => {
    await browser?.close();
    if (registered) runCLI(['merchant', 'origins', 'remove', 'demo', registered.origin]);
    await registered?.close();
    await unregistered?.close();
  });
  beforeEach(async () => {
    context = await browser.newContext();
    page = await context.newPage();
    answers = [];
    page.on('response', (r) => {
      if (r.url() === `${baseURL}/graphql` && r.request().method() === 'POST') answers.push(r);
    });
  });
  afterEach(async () => {
    await context?.close();
  });

  it('preflight from the registered origin: 204, that origin, POST and the headers a checkout sends; no credentials', async () => {
    const res = await fetch(`${baseURL}/graphql`, {
      method: 'OPTIONS',
      headers: {
        Origin: registered.origin,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization,content-type,idempotency-key',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(registered.origin);
    const methods = (res.headers.get('access-control-allow-methods') ?? '').split(',').map((m) => m.trim().toUpperCase());
    expect(methods).toContain('POST');
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim().toLowerCase());
    expect(allowed).toEqual(expect.arrayContaining(['authorization', 'content-type', 'idempotency-key']));
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    expect(res.headers.get('access-control-allow-origin')).not.toBe('*');
  });

  it('a page on the registered origin pays a checkout session with the publishable key, and reads the answer', async () => {
    await page.goto(`${registered.origin}/`);
    const session = await createSession();
    expect(session.publishableKey).toBe('co_pk_demo');
    const key = crypto.randomUUID();

    const got = await fetchFromPage(page, `Bearer ${session.publishableKey}`, chargeCard, {
      k: key,
      i: { paymentMethod: 'pm_card_visa', checkoutSession: session.clientSecret },
    });
    expect(got).toEqual({ status: 200, body: { data: { chargeCard: { status: 'SUCCEEDED', replayed: false, charge: { amount: 2500 } } } } });
    expect(answers).toHaveLength(1);
    const headers = await answers[0].allHeaders();
    expect(headers['access-control-allow-origin']).toBe(registered.origin);
    expect(headers['access-control-allow-credentials']).toBeUndefined();
    expect((await ledger(key)).map((c) => [c.status, c.amount])).toEqual([['succeeded', 2500]]);
  });

  it('a page on an unregistered origin cannot: the browser blocks the request, and nothing is charged', async () => {
    await page.goto(`${unregistered.origin}/`);
    const session = await createSession();
    const key = crypto.randomUUID();

    const got = await fetchFromPage(page, `Bearer ${session.publishableKey}`, chargeCard, {
      k: key,
      i: { paymentMethod: 'pm_card_visa', checkoutSession: session.clientSecret },
    });
    expect(got).toMatchObject({ error: 'TypeError' });
    expect(answers).toHaveLength(0);
    // The preflight was refused, so the POST itself was never sent: nothing charged.
    expect(await ledger(key)).toEqual([]);
    const preflight = await fetch(`${baseURL}/graphql`, {
      method: 'OPTIONS',
      headers: {
        Origin: unregistered.origin,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization,content-type',
      },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('a page on the registered origin that sends the secret key cannot read the answer: no CORS headers for it', async () => {
    await page.goto(`${registered.origin}/`);
    // A read, so that nothing is charged whatever the server does with it.
    const got = await fetchFromPage(page, 'Bearer demo-key', chargeStatus, { k: crypto.randomUUID() });
    expect(got).toMatchObject({ error: 'TypeError' });
    expect(answers).toHaveLength(0);
    // The preflight names headers, not their values, so the browser sent the request;
    // the answer, for a secret key, carries no CORS header. As the browser sent it:
    const res = await fetch(`${baseURL}/graphql`, {
      method: 'POST',
      headers: { Origin: registered.origin, 'Content-Type': 'application/json', Authorization: 'Bearer demo-key' },
      body: JSON.stringify({ query: chargeStatus, variables: { k: crypto.randomUUID() } }),
    });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
  });
});
