// Accessibility and layout of the demo checkout in real headless Chromium:
// the skip link, the switches' names, the fold on a desktop screen, and what
// sits together on a phone.
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { chromiumArgs, chromiumPath } from '../../client/e2e/env';
import { accessible, box, eachDemoPage, expectFinal, expectLedgerPanel, focused } from './page';

const baseURL = inject('baseURL');
const skip = inject('skipReason');

describe.skipIf(skip !== '')('demo checkout accessibility in Chromium', () => {
  let page: Page;
  eachDemoPage((d) => {
    page = d.page;
  });

  it('skip link: the first Tab shows it above the header, not over it, and it moves the focus to the checkout', async () => {
    await page.keyboard.press('Tab');
    await expect(page.getByRole('link', { name: 'Skip to checkout' }).evaluate((a) => a === document.activeElement)).resolves.toBe(true);
    const skip = await box(page, '.skip');
    const header = await box(page, '.topbar');
    expect(skip.height).toBeGreaterThan(20);
    expect(skip.bottom).toBeLessThanOrEqual(header.top + 0.5);

    await page.keyboard.press('Enter');
    await expect(focused(page)).resolves.toBe('checkout-title');
    await page.keyboard.press('Tab');
    await expect(focused(page)).resolves.toBe('card-pm_card_visa');
  });

  it('each switch is named by its short label and described by its paragraph', async () => {
    await expect(accessible(page, '#drop-next')).resolves.toEqual({
      role: 'switch',
      name: 'Lose the next response',
      description: 'The server charges the card, then the connection drops before the answer arrives.',
    });
    await expect(accessible(page, '#unsafe')).resolves.toEqual({
      role: 'switch',
      name: 'Unsafe mode: a new key per retry',
      description: 'What not to do. A retry looks like a new payment and charges again.',
    });
    // Clicking anywhere on a switch's box flips it.
    await page.locator('.switch').first().click({ position: { x: 200, y: 40 } });
    await expect(page.getByTestId('drop-next').isChecked()).resolves.toBe(true);
  });
});

describe.skipIf(skip !== '')('demo checkout layout in Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('desktop 1280×800: Pay, the switches, and after paying the outcome, are above the fold', async () => {
    const context = await browser.newContext({ baseURL, viewport: { width: 1280, height: 800 } });
    try {
      const page = await context.newPage();
      await page.goto('/');
      expect((await box(page, '#pay')).bottom).toBeLessThanOrEqual(800);
      expect((await box(page, '.switches')).bottom).toBeLessThanOrEqual(800);
      await page.getByRole('switch', { name: 'Lose the next response' }).check();
      await page.getByTestId('pay').click();
      await expectFinal(page, 'SUCCEEDED');
      await expectLedgerPanel(page, 1);
      await expect(page.evaluate(() => window.scrollY)).resolves.toBe(0);
      expect((await box(page, '#outcome')).bottom).toBeLessThanOrEqual(800);
      expect((await box(page, '#new-attempt')).bottom).toBeLessThanOrEqual(800);
      expect((await box(page, '#ledger')).bottom).toBeLessThanOrEqual(800);
    } finally {
      await context.close();
    }
  });

  it('phone 390×844: the switches sit right above Pay, and the timeline follows on the same screen', async () => {
    const context = await browser.newContext({ baseURL, viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    try {
      const page = await context.newPage();
      await page.goto('/');
      const switches = await box(page, '.switches');
      const pay = await box(page, '#pay');
      expect(pay.top - switches.bottom).toBeGreaterThanOrEqual(0);
      expect(pay.top - switches.bottom).toBeLessThanOrEqual(24);
      const requests = await box(page, '#timeline');
      expect(requests.bottom - switches.top).toBeLessThanOrEqual(844);
    } finally {
      await context.close();
    }
  });
});
