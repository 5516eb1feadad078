/**
 * A real browser for the console's whole-platform tests and benches: Debian's chromium (installed
 * by scripts/setup.sh --test) driven by playwright-core. Every page records its script errors and
 * failed requests, which the tests require to stay empty.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

// The page's own global, for the init script that runs there; this project's tsconfig has no DOM lib.
declare const sessionStorage: { setItem(k: string, v: string): void };

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

export interface WatchedPage {
  page: Page;
  /** Uncaught exceptions and console errors of the page, in order. */
  errors: string[];
}

/**
 * Chrome's own report that it aborted a request because the host's addresses changed. The browser
 * runs on the platform's host, where each sandbox's interfaces come and go; a CI run failed on one
 * such line (the sandbox list's poll, which the console asks again: packages/console/src/api.ts).
 * It says nothing about the page, and the tests still wait for what the page must show.
 */
const NETWORK_CHANGED = /^Failed to load resource: net::ERR_NETWORK_CHANGED$/;

export async function launchBrowser(): Promise<Browser> {
  if (!CHROMIUM) throw new Error('chromium is not installed: run scripts/setup.sh --test');
  // --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

export interface ContextOptions { viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' }

/**
 * A browser context for functions that run in the page (page.evaluate, addInitScript): tsx
 * compiles this project's TypeScript with esbuild's keepNames, which wraps a named inner function
 * in `__name(fn, "name")`; the page has no such helper, so it gets one that returns the function.
 */
export async function newContext(browser: Browser, opts: ContextOptions = {}): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: opts.viewport ?? { width: 1280, height: 800 }, colorScheme: opts.colorScheme ?? 'light' });
  await context.addInitScript('globalThis.__name = (fn) => fn;');
  return context;
}

export async function openPage(browser: Browser | BrowserContext, url: string, opts: ContextOptions = {}): Promise<WatchedPage> {
  const context = 'newContext' in browser ? await newContext(browser, opts) : browser;
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  // The location names the resource of a "Failed to load resource" line, which its text does not.
  page.on('console', (msg) => {
    if (msg.type() !== 'error' || NETWORK_CHANGED.test(msg.text())) return;
    errors.push(`console: ${msg.text()}${msg.location().url ? ` (${msg.location().url})` : ''}`);
  });
  await page.goto(url);
  return { page, errors };
}

/** Signs in on the console's form with `key`, as a person does: the field by its label, the button by its name. */
export async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * A page already signed in: the key is put into sessionStorage before the console's script runs
 * (as a reload after signing in finds it), so the page opens on the view asked for.
 */
export async function openSignedIn(browser: Browser, url: string, key: string, opts: ContextOptions = {}): Promise<WatchedPage> {
  const context = await newContext(browser, opts);
  await context.addInitScript((k) => { sessionStorage.setItem('svc.console.apiKey', k); }, key);
  return openPage(context, url);
}
