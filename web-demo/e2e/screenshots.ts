// Takes web-demo/screenshots/checkout-desktop.png and checkout-phone.png: the
// checkout right after a lost response was retried with the same key, so the
// timeline shows the network error, the replayed answer and one charge.
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type BrowserContextOptions } from 'playwright-core';
import { expect, inject, it } from 'vitest';
import { chromiumArgs, chromiumPath } from '../../client/e2e/env';
import { repoRoot } from './server';

const baseURL = inject('baseURL');
const skip = inject('skipReason');
const dir = join(repoRoot, 'web-demo', 'screenshots');

// The desktop shot is what a 1280×800 screen shows without scrolling: Pay,
// the outcome, the timeline and the ledger are all above the fold. The phone
// shot is the screen a shopper sees after paying: the switches, Pay and the
// outcome together.
const shots: [string, BrowserContextOptions][] = [
  ['checkout-desktop.png', { viewport: { width: 1280, height: 800 } }],
  ['checkout-phone.png', { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true }],
];

it.skipIf(skip !== '')('takes the screenshots', async () => {
  mkdirSync(dir, { recursive: true });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
  try {
    for (const [name, options] of shots) {
      const context = await browser.newContext({ ...options, baseURL, reducedMotion: 'reduce' });
      const page = await context.newPage();
      await page.goto('/');
      await page.getByRole('switch', { name: /Lose the next response/ }).check();
      await page.getByTestId('pay').click();
      await page.getByTestId('result-status').filter({ hasText: 'SUCCEEDED' }).waitFor({ timeout: 15_000 });
      await page.locator('[data-testid="ledger-summary"][data-succeeded="1"]').waitFor({ timeout: 10_000 });
      const path = join(dir, name);
      await page.mouse.move(0, 0); // no hover effect in the picture
      if (options.isMobile) {
        await page.locator('.switches').evaluate((e) => e.scrollIntoView({ block: 'start' }));
      } else {
        await page.evaluate(() => window.scrollTo(0, 0));
      }
      await page.screenshot({ path, animations: 'disabled' });
      expect(statSync(path).size).toBeGreaterThan(10_000);
      console.log(`wrote ${path}`);
      await context.close();
    }
  } finally {
    await browser.close();
  }
});
