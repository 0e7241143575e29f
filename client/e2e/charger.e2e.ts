// @chargeonce/client in real Chromium, as a shop's page on another origin
// uses it: the page imports the packed artifact (npm pack of client/) from a
// static server on its own loopback port, and pays checkout sessions that
// the test creates on the Node side, as a shop's backend does, against the
// real server and its card simulator. Every scenario checks what the page
// sent (each request's operation and key) and the provider's ledger: one
// charge per attempt, whatever the network does.
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { packClient, startShop, testPagePath, type Artifact, type Shop } from './artifact.js';
import {
  chargerLog,
  ended,
  keyOf,
  keysOf,
  mount,
  only,
  operationOf,
  pay,
  payTwiceAtOnce,
  reachedState,
  recordSends,
  resume,
  settle,
  startedAt,
  startPay,
  valueOf,
  type ChargerOptions,
  type Ending,
  type Outcome,
  type Send,
} from './page.js';
import { chromiumArgs, chromiumPath } from './env.js';
import { chargeStatus, ledger } from './ledger.js';
import { clientServer, type RunningServer } from './server.js';

const baseURL = inject('baseURL');
const skip = inject('skipReason');
const { runCLI, startServer } = clientServer;

/** The development fault that runs a request, then cuts its answer (devfault/). */
const faultHeader = 'x-chargeonce-fault';
const visa = { paymentMethod: 'pm_card_visa' };
const slow = { paymentMethod: 'pm_card_slow' }; // SIM_SLOW_DELAY, 2 s in serverEnv

interface Session {
  clientSecret: string;
  publishableKey: string;
}

/** What a shop's backend does before its page pays: a checkout session for a new cart. */
async function createSession(server = baseURL): Promise<Session> {
  const res = await fetch(`${server}/demo/checkout-session`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ cartId: `client-cart-${crypto.randomUUID()}`, amount: 2500, currency: 'USD' }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Session;
}

/** Exactly one charge at the provider for key, of the session's amount. */
async function expectOneCharge(key: string) {
  expect((await ledger(key, baseURL)).map((c) => [c.status, c.amount])).toEqual([['succeeded', 2500]]);
}

/** Polls the server (with the secret key, from Node) until key's attempt is in status. */
async function serverSays(key: string, status: string, timeout = 5_000) {
  const deadline = Date.now() + timeout;
  let last: string | null = null;
  while (Date.now() < deadline) {
    last = await chargeStatus(key, baseURL);
    if (last === status) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  expect.fail(`the server says ${last ?? 'nothing'} for ${key}, not ${status}, after ${timeout} ms`);
}

/** Waits until the page has sent a chargeCard; that send. */
async function firstChargeCard(sends: Send[], timeout = 5_000): Promise<Send> {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const s = only(sends, 'chargeCard')[0];
    if (s) return s;
    await new Promise((r) => setTimeout(r, 20));
  }
  return expect.fail(`the page sent no chargeCard within ${timeout} ms`);
}

/** What the page sent, by operation, and how each request ended: one line in the test's log. */
function report(scenario: string, sends: Ended[], extra = '') {
  const by = new Map<string, string[]>();
  for (const s of sends) by.set(s.operation, [...(by.get(s.operation) ?? []), endText(s)]);
  const line = [...by].map(([op, ends]) => `${op} ×${ends.length} (${ends.join(', ')})`).join('; ');
  console.log(`${scenario}: ${line}${extra ? `; ${extra}` : ''}`);
}

type Ended = Send & Ending;
const endText = (s: Ended) => (s.failure ? `${s.status ?? 'no answer'} ${s.failure}` : s.open ? `${s.transport} open` : String(s.status));

/** A readable line per send, for failure messages. */
const describeSends = (sends: Ended[]) => sends.map((s) => `${s.transport} ${s.operation} ${s.key} ${endText(s)}`).join('\n');

describe.skipIf(skip !== '')('@chargeonce/client in Chromium, on another origin', () => {
  let artifact: Artifact;
  let shop: Shop;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let sends: Send[];
  const endpoint = `${baseURL}/graphql`;

  /** The options of a charger for session on the shared server. */
  const options = (s: Session, more: Partial<ChargerOptions> = {}): ChargerOptions => ({
    endpoint,
    publishableKey: s.publishableKey,
    session: s.clientSecret,
    storage: 'session',
    live: 'sse',
    crossTab: true,
    ...more,
  });

  beforeAll(async () => {
    artifact = packClient();
    shop = await startShop(artifact);
    expect(runCLI(['merchant', 'origins', 'add', 'demo', shop.origin])).toContain(shop.origin);
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  });
  afterAll(async () => {
    await browser?.close();
    if (shop) runCLI(['merchant', 'origins', 'remove', 'demo', shop.origin]);
    await shop?.close();
    artifact?.remove();
  });
  beforeEach(async () => {
    context = await browser.newContext();
    page = await context.newPage();
    sends = recordSends(page, endpoint);
    await page.goto(`${shop.origin}/`);
  });
  afterEach(async () => {
    await context?.close();
  });

  it('a lost response: retried with the same key, SUCCEEDED with replayed: true, one charge', async () => {
    const session = await createSession();
    // The first chargeCard carries the fault: the server charges, then cuts its answer.
    const dropped: string[] = [];
    await page.route(endpoint, (route) => {
      const r = route.request();
      const body = r.method() === 'POST' ? (r.postDataJSON() as { query?: string; variables?: Record<string, unknown> }) : null;
      if (!body || operationOf(body) !== 'chargeCard' || dropped.length > 0) return route.continue();
      dropped.push(keyOf(body) ?? '');
      return route.continue({ headers: { ...r.headers(), [faultHeader]: 'drop-response' } });
    });
    await mount(page, options(session));

    const outcome = valueOf(await pay(page, visa));

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: true, charge: { amount: 2500 } });
    const done = await ended(sends);
    const cards = only(done, 'chargeCard');
    expect(dropped).toEqual([outcome.key]);
    expect(cards.length, describeSends(done)).toBeGreaterThanOrEqual(2);
    expect(cards[0]!.failure, 'the first answer was cut').toBeDefined();
    expect(cards.at(-1)!.status).toBe(200);
    expect(keysOf(sends)).toEqual([outcome.key]);
    const { events } = await chargerLog(page);
    expect(events.filter((e) => e.type === 'send' && e.operation === 'chargeCard')).toHaveLength(cards.length);
    expect(events).toContainEqual(expect.objectContaining({ type: 'retry', key: outcome.key, cause: 'network' }));
    report('lost response', done);
    await expectOneCharge(outcome.key);
  });

  it('the network dead for 10 s, then back: the same key for every send, one charge', async () => {
    const session = await createSession();
    const deadFor = 10_000;
    let deadUntil = Number.POSITIVE_INFINITY;
    const aborted: number[] = [];
    await page.route(endpoint, (route) => {
      if (Date.now() >= deadUntil) return route.continue();
      aborted.push(Date.now());
      return route.abort('internetdisconnected');
    });
    await mount(page, options(session));

    deadUntil = Date.now() + deadFor;
    await startPay(page, visa);
    let settled = await settle(page);
    let resumed = false;
    if ('error' in settled && settled.error.startsWith('UnknownOutcomeError')) {
      // The retry budget ran out while the network was dead: the contract's
      // way on is resume(), which asks again with the same key.
      resumed = true;
      const late = deadUntil - Date.now();
      if (late > 0) await new Promise((r) => setTimeout(r, late));
      settled = (await resume(page)) as typeof settled;
    }
    const outcome = valueOf(settled);

    expect(outcome, resumed ? 'after resume()' : 'pay() itself').toMatchObject({ status: 'SUCCEEDED' });
    expect(aborted.length).toBeGreaterThanOrEqual(2);
    const done = await ended(sends);
    const cards = only(done, 'chargeCard');
    expect(cards.filter((s) => s.failure).length, describeSends(done)).toBeGreaterThanOrEqual(2);
    expect(cards.at(-1)!.status).toBe(200);
    expect(startedAt(cards.at(-1)!)).toBeGreaterThanOrEqual(deadUntil - 50);
    expect(keysOf(done), describeSends(done)).toEqual([outcome.key]);
    await expectOneCharge(outcome.key);
    report('dead network', done, `${aborted.length} aborted by the test${resumed ? '; resumed after UnknownOutcomeError' : ''}`);
  });

  it('a reload while PROCESSING: a new charger on the same storage resumes the same key, SUCCEEDED, one charge', async () => {
    const session = await createSession();
    await mount(page, options(session));
    await startPay(page, slow);
    const first = await firstChargeCard(sends);
    await serverSays(first.key!, 'PROCESSING');

    await page.reload();
    await mount(page, options(session));
    const outcome = valueOf(await resume(page));

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key: first.key });
    const done = await ended(sends);
    expect(keysOf(done), describeSends(done)).toEqual([first.key]);
    report('reload while PROCESSING', done);
    await expectOneCharge(first.key!);
  });

  it('two tabs pay one session at the same moment (local storage): one key, one charge, both show the outcome', async () => {
    const session = await createSession();
    const second = await context.newPage();
    const secondSends = recordSends(second, endpoint);
    await second.goto(`${shop.origin}/`);
    await mount(page, options(session, { storage: 'local', live: 'poll' }));
    await mount(second, options(session, { storage: 'local', live: 'poll' }));

    const at = Date.now() + 300; // one clock: both tabs call pay() in the same millisecond
    await Promise.all([startPay(page, visa, at), startPay(second, visa, at)]);
    const [one, two] = (await Promise.all([settle(page), settle(second)])).map(valueOf) as [Outcome, Outcome];

    expect(one).toMatchObject({ status: 'SUCCEEDED' });
    expect(two).toMatchObject({ status: 'SUCCEEDED', key: one.key });
    const [done, secondDone] = await Promise.all([ended(sends), ended(secondSends)]);
    const all = [...done, ...secondDone];
    expect(keysOf(all), describeSends(all)).toEqual([one.key]);
    for (const p of [page, second]) {
      expect((await chargerLog(p)).states.at(-1)).toMatchObject({ kind: 'settled', key: one.key });
    }
    await expectOneCharge(one.key);
    report('two tabs, first', done);
    report('two tabs, second', secondDone);
  });

  it('offline while PROCESSING, then online: paused on the way, one charge', async () => {
    const session = await createSession();
    // The slow card's first chargeCard reaches the server, which works on
    // it; then its connection breaks. The library sends the same key again
    // and the server, still working, answers PROCESSING: the library's own
    // PROCESSING state, which it follows (here over a websocket).
    const cut: string[] = [];
    await page.route(endpoint, async (route) => {
      const r = route.request();
      const body = r.method() === 'POST' ? (r.postDataJSON() as { query?: string; variables?: Record<string, unknown> }) : null;
      if (!body || operationOf(body) !== 'chargeCard' || cut.length > 0) return route.continue();
      const key = keyOf(body)!;
      cut.push(key);
      void route.fetch({ timeout: 15_000 }).catch(() => undefined);
      await serverSays(key, 'PROCESSING');
      return route.abort('connectionreset');
    });
    await mount(page, options(session, { live: 'ws' }));
    await startPay(page, slow);
    const processing = await reachedState(page, 'following', 5_000);
    const before = (await chargerLog(page)).states.map((s) => s.kind).join(' → ');
    expect(processing, `states: ${before}; sends:\n${describeSends(await ended(sends, 100))}`).toBe(true);
    const key = cut[0]!;

    await context.setOffline(true);
    const paused = await reachedState(page, 'following', 3_000, true);
    // The bank finishes meanwhile; the page learns it once it is back.
    await serverSays(key, 'SUCCEEDED');
    await context.setOffline(false);
    const outcome = valueOf(await settle(page));

    expect(outcome).toMatchObject({ status: 'SUCCEEDED', key });
    const { states, events } = await chargerLog(page);
    const named = states.map((s) => (s.paused ? `${s.kind} (paused)` : s.kind)).join(' → ');
    expect(paused, `states: ${named}`).toBe(true);
    expect(states.find((s) => s.paused)).toMatchObject({ kind: 'following', key });
    expect(events).toContainEqual(expect.objectContaining({ type: 'pause', key, reason: 'offline' }));
    expect(events).toContainEqual(expect.objectContaining({ type: 'unpause', key }));
    const done = await ended(sends);
    expect(keysOf(done), describeSends(done)).toEqual([key]);
    await expectOneCharge(key);
    report('offline while PROCESSING', done, `states ${named}`);
  });

  it('a double click: two pay() calls at once send one chargeCard, one key, one charge', async () => {
    const session = await createSession();
    await mount(page, options(session));

    const [one, two] = (await payTwiceAtOnce(page, visa)).map(valueOf) as [Outcome, Outcome];

    expect(one).toMatchObject({ status: 'SUCCEEDED' });
    expect(two).toMatchObject({ status: 'SUCCEEDED', key: one.key });
    const done = await ended(sends);
    expect(only(done, 'chargeCard'), describeSends(done)).toHaveLength(1);
    expect(only(done, 'chargeCard')[0]!.status).toBe(200);
    expect(keysOf(done)).toEqual([one.key]);
    report('double click', done);
    await expectOneCharge(one.key);
  });

  it('CORS: the page is on another origin, and chargeCard answers carry its origin', async () => {
    const session = await createSession();
    await mount(page, options(session));
    const outcome = valueOf(await pay(page, visa));
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: false });

    const request = only(sends, 'chargeCard')[0]!.request!;
    const sent = await request.allHeaders();
    expect(sent.origin).toBe(shop.origin);
    expect(sent.authorization).toBe(`Bearer ${session.publishableKey}`);
    expect((await (await request.response())!.allHeaders())['access-control-allow-origin']).toBe(shop.origin);
    // The browser hides what CORS blocks, so ask from Node, as the page
    // asked: its preflight, then its very request (a replay: nothing new is charged).
    const custom = Object.keys(sent).filter((h) => !['origin', 'referer', 'user-agent', 'accept', 'accept-language', 'content-length'].includes(h) && !h.startsWith('sec-'));
    const preflight = await fetch(endpoint, {
      method: 'OPTIONS',
      headers: { Origin: shop.origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': custom.join(',') },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(shop.origin);
    const replay = await fetch(endpoint, { method: 'POST', headers: { ...sent, origin: shop.origin }, body: request.postData() });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('access-control-allow-origin')).toBe(shop.origin);
    expect(replay.headers.get('access-control-allow-credentials')).toBeNull();
    expect(await replay.json()).toMatchObject({ data: { chargeCard: { status: 'SUCCEEDED', replayed: true } } });
    report('CORS', await ended(sends));
    await expectOneCharge(outcome.key);
  });

  it('the page\'s trace context crosses CORS: traceparent and tracestate on every request, one charge', async () => {
    const session = await createSession();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await mount(page, options(session, { traceparent, tracestate: 'shop=checkout' }));
    const outcome = valueOf(await pay(page, visa));
    expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: false });

    const cards = only(await ended(sends), 'chargeCard');
    expect(cards).toHaveLength(1);
    const sent = await cards[0]!.request!.allHeaders();
    expect(sent.traceparent).toBe(traceparent);
    expect(sent.tracestate).toBe('shop=checkout');
    await expectOneCharge(outcome.key);
  });

  describe('with the publishable key rate-limited (a server of its own: RATE_LIMIT_PUBLISHABLE=0.5, burst 1)', () => {
    let limited: RunningServer;
    beforeAll(async () => {
      limited = await startServer({ RATE_LIMIT_PUBLISHABLE: '0.5', RATE_LIMIT_PUBLISHABLE_BURST: '1' }, 'server-rate-limited');
    });
    afterAll(async () => {
      await limited?.stop();
    });

    /**
     * Spends the one token of the merchant's publishable keys (as another
     * page of its shop would), so that the page's first chargeCard is
     * refused; a 429 spends nothing, so it waits for the token a test
     * before it used.
     */
    async function spendToken(endpoint: string, session: { publishableKey: string; clientSecret: string }) {
      const deadline = Date.now() + 5_000;
      for (;;) {
        const res = await fetch(endpoint, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${session.publishableKey}` },
          body: JSON.stringify({
            query: 'query($k:String!,$s:String){chargeStatus(idempotencyKey:$k,checkoutSession:$s){status}}',
            variables: { k: crypto.randomUUID(), s: session.clientSecret },
          }),
        });
        if (res.status === 200) return;
        expect(res.status).toBe(429);
        expect(Date.now(), 'the merchant got no token back within 5 s').toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 200));
      }
    }

    /** Pays a session of the rate-limited server from the page, right after the merchant's one token is spent; what was sent. */
    async function payLimited(): Promise<{ outcome: Outcome; cards: Ended[]; limitedSends: Ended[] }> {
      const endpoint = `${limited.url}/graphql`;
      const limitedSends = recordSends(page, endpoint);
      const session = await createSession(limited.url);
      await mount(page, options(session, { endpoint }));
      await spendToken(endpoint, session);
      const outcome = valueOf(await pay(page, visa));
      const done = await ended(limitedSends);
      return { outcome, cards: only(done, 'chargeCard'), limitedSends: done };
    }

    /** Each RATE_LIMITED chargeCard's next send came at least its retryAfterMs later. */
    async function expectWaits(cards: Ended[], all: Ended[]) {
      expect(cards[0]!.status, describeSends(all)).toBe(429);
      for (const [i, c] of cards.slice(0, -1).entries()) {
        const res = (await c.request!.response())!;
        expect(res.status()).toBe(429);
        const body = (await res.json()) as { errors: { extensions: { code: string; retryAfterMs: number } }[] };
        const { code, retryAfterMs } = body.errors[0]!.extensions;
        expect(code).toBe('RATE_LIMITED');
        expect(retryAfterMs).toBeGreaterThan(0);
        const gap = startedAt(cards[i + 1]!) - startedAt(c);
        expect(gap, `send ${i + 2} came ${gap} ms after a RATE_LIMITED asking ${retryAfterMs} ms`).toBeGreaterThanOrEqual(retryAfterMs);
        const retry = (await chargerLog(page)).events.filter((e) => e.type === 'retry')[i]!;
        expect(retry).toMatchObject({ cause: 'RATE_LIMITED', key: c.key });
        expect(retry.waitMs).toBeGreaterThanOrEqual(retryAfterMs);
      }
      expect(cards.at(-1)!.status).toBe(200);
    }

    it('RATE_LIMITED with retryAfterMs (cross-origin): the next send waits at least that long, the same key, one charge', async () => {
      // What the page would be answered, asked from Node: the browser hides a
      // cross-origin answer without CORS headers, and the library then sees
      // a network error instead of RATE_LIMITED and its retryAfterMs.
      const endpoint = `${limited.url}/graphql`;
      const session = await createSession(limited.url);
      await spendToken(endpoint, session);
      const asPage = await fetch(endpoint, {
        method: 'POST',
        headers: { Origin: shop.origin, 'Content-Type': 'application/json', Authorization: `Bearer ${session.publishableKey}` },
        body: JSON.stringify({
          query: 'query($k:String!,$s:String){chargeStatus(idempotencyKey:$k,checkoutSession:$s){status}}',
          variables: { k: crypto.randomUUID(), s: session.clientSecret },
        }),
      });
      expect(asPage.status).toBe(429);
      expect.soft(asPage.headers.get('access-control-allow-origin'), 'a RATE_LIMITED answer to a registered origin carries its CORS header').toBe(shop.origin);

      const { outcome, cards, limitedSends } = await payLimited();

      expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: false });
      report('rate limited, cross-origin', limitedSends);
      expect(keysOf(limitedSends), describeSends(limitedSends)).toEqual([outcome.key]);
      await expectWaits(cards, limitedSends);
      await expectOneCharge(outcome.key);
    });

    it('RATE_LIMITED with retryAfterMs (the page on the same origin as the server): the next send waits at least that long', async () => {
      // The same page and artifact, served under the server's origin (by
      // the browser's router), so that no CORS rule stands between the 429
      // and the library.
      await page.route(`${limited.url}/shop/**`, (route) => {
        const path = new URL(route.request().url()).pathname.slice('/shop/'.length);
        return route.fulfill({ path: path === '' ? testPagePath : join(artifact.dir, path), headers: { 'Cache-Control': 'no-store' } });
      });
      await page.goto(`${limited.url}/shop/`);
      const { outcome, cards, limitedSends } = await payLimited();

      expect(outcome).toMatchObject({ status: 'SUCCEEDED', replayed: false });
      report('rate limited, same origin', limitedSends);
      expect(keysOf(limitedSends), describeSends(limitedSends)).toEqual([outcome.key]);
      await expectWaits(cards, limitedSends);
      await expectOneCharge(outcome.key);
    });
  });
});
