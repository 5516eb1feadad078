/**
 * A real browser for the console's whole-platform tests and benches: Debian's chromium (installed
 * by scripts/setup.sh --test) driven by playwright-core. Every page records its script errors and
 * failed requests, which the tests require to stay empty.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

export interface WatchedPage {
  page: Page;
  /** Uncaught exceptions and console errors of the page, in order. */
  errors: string[];
}

export async function launchBrowser(): Promise<Browser> {
  if (!CHROMIUM) throw new Error('chromium is not installed: run scripts/setup.sh --test');
  // --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

export async function openPage(browser: Browser | BrowserContext, url: string, opts: { viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' } = {}): Promise<WatchedPage> {
  const context = 'newContext' in browser ? await browser.newContext({ viewport: opts.viewport ?? { width: 1280, height: 800 }, colorScheme: opts.colorScheme ?? 'light' }) : browser;
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(`console: ${msg.text()}`); });
  await page.goto(url);
  return { page, errors };
}

/** Signs in on the console's form with `key`, as a person does: the field by its label, the button by its name. */
export async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}
