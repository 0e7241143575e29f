// What the browser tests read from the page and from the server: the stored
// key, the timeline rows, the provider's ledger, focus, boxes, and the
// accessibility tree as Chromium computes it.
import type { Page } from 'playwright-core';
import { expect, inject } from 'vitest';

const baseURL = inject('baseURL');

export interface ProviderCharge {
  id: string;
  status: 'succeeded' | 'failed';
  amount: number;
  metadata: Record<string, string>;
}

/** The provider's charges for one of chargeonce's idempotency keys. */
export async function ledger(key: string): Promise<ProviderCharge[]> {
  const q = new URLSearchParams({ merchant: 'demo', client_idempotency_key: key });
  const res = await fetch(`${baseURL}/provider/v1/charges?${q}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: ProviderCharge[] }).data;
}

export async function chargeStatus(key: string): Promise<string | null> {
  const res = await fetch(`${baseURL}/graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer demo-key' },
    body: JSON.stringify({ query: 'query($k:String!){chargeStatus(idempotencyKey:$k){status}}', variables: { k: key } }),
  });
  const body = (await res.json()) as { data: { chargeStatus: { status: string } | null } };
  return body.data.chargeStatus?.status ?? null;
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

export interface Row {
  operation: string;
  outcome: string;
  key: string;
  status: string;
  replayed: string;
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
