// What the browser tests read from the page and from the server: the stored
// key, the timeline rows, the provider's ledger (its charges, refunds,
// captures and voids), the requests the page sent, focus, boxes, and the
// accessibility tree as Chromium computes it.
import { chromium, type Browser, type BrowserContext, type Page, type Request } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, expect, inject } from 'vitest';
import { chromiumArgs, chromiumPath } from '../../client/e2e/env';
import * as fromServer from '../../client/e2e/ledger';
import type { ProviderCharge } from '../../client/e2e/ledger';

const baseURL = inject('baseURL');

export type { ProviderCharge } from '../../client/e2e/ledger';

/** The provider's charges for one of chargeonce's idempotency keys, at the server at base (the shared one by default). */
export const ledger = (key: string, base = baseURL): Promise<ProviderCharge[]> => fromServer.ledger(key, base);

/** The charges of a ledger that took money. */
export const charged = (charges: readonly ProviderCharge[]) => charges.filter((c) => c.status === 'succeeded').length;

export interface ProviderRefund {
  id: string;
  /** pending: accepted, not settled yet. Only succeeded gave money back. */
  status: 'pending' | 'succeeded' | 'failed';
  amount: number;
  charge: string;
  metadata: Record<string, string>;
}

/** The provider's refunds of one of its charges (its id, ch_…), at the server at base. */
export const refunds = (chargeId: string, base = baseURL) => fromServer.ofCharge<ProviderRefund>('refunds', chargeId, base);

export interface ProviderCapture {
  id: string;
  /** succeeded, or failed (declined): only succeeded took money. */
  status: 'succeeded' | 'failed';
  amount: number;
  final: boolean;
  charge: string;
  /** chargeonce's key at the provider: one per capture attempt, never rotated. */
  idempotency_key: string;
  metadata: Record<string, string>;
}

export interface ProviderVoid {
  id: string;
  charge: string;
  idempotency_key: string;
  metadata: Record<string, string>;
}

/** The provider's captures of one of its charges (its id, ch_…), at the server at base. */
export const captures = (chargeId: string, base = baseURL) => fromServer.ofCharge<ProviderCapture>('captures', chargeId, base);

/** The provider's voids of one of its charges, at the server at base. */
export const voids = (chargeId: string, base = baseURL) => fromServer.ofCharge<ProviderVoid>('voids', chargeId, base);

/** What chargeonce says the charge of key stands at in its captures, and its captures' ids. */
export async function chargeCaptures(
  key: string,
  base = baseURL,
): Promise<{ captureStatus: string; amountCaptured: number; amountCapturable: number; captures: { id: string }[] } | null> {
  const p = await fromServer.askChargeStatus<{ charge: { captureStatus: string; amountCaptured: number; amountCapturable: number; captures: { id: string }[] } | null }>(
    key,
    'charge{captureStatus amountCaptured amountCapturable captures{id}}',
    base,
  );
  return p?.charge ?? null;
}

/** The status chargeonce gives the attempt of key, asked with the demo merchant's secret key. */
export const chargeStatus = (key: string, base = baseURL) => fromServer.chargeStatus(key, base);

/** What chargeonce says the charge of key has refunded, and its refunds' ids. */
export async function chargeRefunds(key: string, base = baseURL): Promise<{ amountRefunded: number; refunds: { id: string }[] } | null> {
  const p = await fromServer.askChargeStatus<{ charge: { amountRefunded: number; refunds: { id: string }[] } | null }>(
    key,
    'charge{amountRefunded refunds{id}}',
    base,
  );
  return p?.charge ?? null;
}

/**
 * The key of the attempt the charger persisted in sessionStorage (the
 * library's record, `chargeonce:attempt:<hash>`), or null when there is none.
 * The page keeps one record at most: it resets the charger before it starts
 * a new checkout.
 */
export async function storedKey(page: Page): Promise<string | null> {
  const keys = await page.evaluate(() => {
    const found: string[] = [];
    for (let i = 0; i < sessionStorage.length; i++) {
      const name = sessionStorage.key(i)!;
      if (name.startsWith('chargeonce:attempt:')) found.push((JSON.parse(sessionStorage.getItem(name)!) as { key: string }).key);
    }
    return found;
  });
  expect(keys.length, 'attempt records in sessionStorage').toBeLessThanOrEqual(1);
  return keys[0] ?? null;
}

/**
 * The id the page keeps for its act on the charge (refund, capture, void):
 * the key of the library runner's record in sessionStorage
 * (`chargeonce-demo:<act>:<charge id>`), or null when there is none.
 */
export async function keptActId(page: Page, act: 'refund' | 'capture' | 'void'): Promise<string | null> {
  const keys = await page.evaluate((prefix) => {
    const found: string[] = [];
    for (let i = 0; i < sessionStorage.length; i++) {
      const name = sessionStorage.key(i)!;
      if (name.startsWith(prefix)) found.push((JSON.parse(sessionStorage.getItem(name)!) as { key: string }).key);
    }
    return found;
  }, `chargeonce-demo:${act}:`);
  expect(keys.length, `${act} records in sessionStorage`).toBeLessThanOrEqual(1);
  return keys[0] ?? null;
}

export interface Row {
  operation: string;
  outcome: string;
  key: string;
  status: string;
  replayed: string;
  /** A PROCESSING answer's nextAction type (REDIRECT); absent otherwise. */
  nextAction?: string;
}

export async function timeline(page: Page): Promise<Row[]> {
  return page.getByTestId('request').evaluateAll((lis) =>
    lis.map((li) => {
      const d = (li as HTMLElement).dataset;
      return {
        operation: d.operation ?? '',
        outcome: d.outcome ?? '',
        key: d.key ?? '',
        status: d.status ?? '',
        replayed: d.replayed ?? '',
        ...(d.nextAction ? { nextAction: d.nextAction } : {}),
      };
    }),
  );
}

/** The id of the focused element, or its tag. */
export async function focused(page: Page): Promise<string> {
  return page.evaluate(() => {
    const a = document.activeElement;
    return a?.id || a?.tagName.toLowerCase() || '';
  });
}

/** The accessible name and description Chromium computes for the element at selector. */
export async function accessible(page: Page, selector: string): Promise<{ role?: string; name?: string; description?: string }> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { root } = await cdp.send('DOM.getDocument');
    const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector });
    const { nodes } = await cdp.send('Accessibility.getPartialAXTree', { nodeId, fetchRelatives: false });
    const n = nodes[0];
    return { role: n.role?.value as string, name: n.name?.value as string, description: n.description?.value as string };
  } finally {
    await cdp.detach();
  }
}

export async function box(page: Page, selector: string) {
  const b = await page.locator(selector).first().boundingBox();
  expect(b, selector).not.toBeNull();
  return { top: b!.y, bottom: b!.y + b!.height, height: b!.height };
}

export async function expectFinal(page: Page, status: 'SUCCEEDED' | 'FAILED', timeout = 15_000) {
  await page.getByTestId('result-status').filter({ hasText: status }).waitFor({ timeout });
}

/** Waits until the page's ledger panel shows n charges that took money. */
export async function expectLedgerPanel(page: Page, succeeded: number) {
  await page.locator(`[data-testid="ledger-summary"][data-succeeded="${succeeded}"]`).waitFor({ timeout: 10_000 });
}

/** The requests page sends to path (one of the shop backend's routes, say), as they go. */
export function watchPath(page: Page, path: string): Request[] {
  const sent: Request[] = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname === path) sent.push(r);
  });
  return sent;
}

/** A GraphQL request a page sent, by the field it asks for, and how it ended. */
export interface Sent {
  operation: 'chargeCard' | 'chargeStatus' | 'chargeUpdated' | string;
  key: string;
  /** The page's address when it was sent. */
  from: string;
  /** The answer's status, 'null' for an unknown key, or how it failed. */
  ended: Promise<string>;
}

const fields: Record<string, string> = { ChargeCard: 'chargeCard', ChargeStatus: 'chargeStatus' };

/**
 * Records every chargeCard and chargeStatus POST that the pages of context
 * send, across navigations, and each chargeUpdated subscription that page
 * opens on its websocket.
 */
export function watchRequests(context: BrowserContext, page: Page): Sent[] {
  const sent: Sent[] = [];
  context.on('request', (r) => {
    if (new URL(r.url()).pathname !== '/graphql' || r.method() !== 'POST') return;
    const body = r.postDataJSON() as { operationName?: string; variables?: { idempotencyKey?: string } } | null;
    const operation = fields[body?.operationName ?? ''] ?? body?.operationName ?? 'unknown';
    const ended = r.response().then(
      async (res) => {
        if (!res) return 'no answer';
        const json = (await res.json()) as { data?: Record<string, { status: string } | null>; errors?: { extensions?: { code?: string } }[] };
        if (json.errors?.length) return json.errors[0].extensions?.code ?? 'error';
        return Object.values(json.data ?? {})[0]?.status ?? 'null';
      },
      () => 'network error',
    );
    sent.push({ operation, key: body?.variables?.idempotencyKey ?? '', from: r.frame().url(), ended: ended.catch(() => 'network error') });
  });
  page.on('websocket', (ws) =>
    ws.on('framesent', (f) => {
      const msg = JSON.parse(String(f.payload)) as { type?: string; payload?: { variables?: { idempotencyKey?: string } } };
      if (msg.type === 'subscribe') sent.push({ operation: 'chargeUpdated', key: msg.payload?.variables?.idempotencyKey ?? '', from: page.url(), ended: Promise.resolve('subscribed') });
    }),
  );
  return sent;
}

/** One line for the log: each operation's count and how each ended, and the provider's charges. */
export async function describeRun(sent: readonly Sent[], charges: readonly ProviderCharge[]): Promise<string> {
  const by = new Map<string, string[]>();
  for (const s of sent) by.set(s.operation, [...(by.get(s.operation) ?? []), await s.ended]);
  const requests = ['chargeCard', 'chargeStatus', 'chargeUpdated'].map((op) => {
    const ends = by.get(op) ?? [];
    return `${op} ×${ends.length}${ends.length ? ` (${ends.join(', ')})` : ''}`;
  });
  return `${requests.join('; ')}; provider: ${charges.map((c) => c.status).join(', ') || 'no charge'} (${charged(charges)} charged)`;
}

/** The browser, context and page of one test of the demo (eachDemoPage). */
export interface DemoPage {
  browser: Browser;
  context: BrowserContext;
  page: Page;
}

/** What a describe block may change in eachDemoPage's set-up. */
export interface DemoPageOptions {
  /** The server the pages open; default the browser tests' own. */
  url?: () => string;
  /** Called with each test's context and page before the page opens the demo: to watch its requests, say. */
  beforeGoto?: (context: BrowserContext, page: Page) => void;
}

/**
 * Registers, in the describe block it is called in, one Chromium for the
 * block and, for each test, a fresh context and page on the demo page, which
 * set receives before the test runs.
 */
export function eachDemoPage(set: (d: DemoPage) => void, opts: DemoPageOptions = {}): void {
  let browser: Browser;
  let context: BrowserContext | undefined;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  });
  afterAll(async () => {
    await browser?.close();
  });
  beforeEach(async () => {
    context = await browser.newContext({ baseURL: opts.url?.() ?? baseURL });
    const page = await context.newPage();
    opts.beforeGoto?.(context, page);
    await page.goto('/');
    set({ browser, context, page });
  });
  afterEach(async () => {
    await context?.close();
  });
}
