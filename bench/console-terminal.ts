/**
 * The console's terminal: how long a typed key takes to show, timed inside the page from its
 * keydown (a capturing listener, before xterm.js sees it) to the DOM change of xterm's rows that
 * shows it (a MutationObserver; xterm draws in an animation frame, so this is the frame that
 * paints it). The path: xterm.js -> envd's PTY input through the sandbox proxy -> the shell's
 * echo on the PTY's output stream -> xterm.js.
 */
import { newContext } from '../test/e2e/browser.ts';
import type { Browser } from 'playwright-core';

// Browser globals of the functions that run in the page; this project's tsconfig has no DOM lib.
declare const document: any, window: any, performance: any, MutationObserver: any;

const KEY = 'q';

/** Opens `sandboxUrl` (a sandbox's page, key already kept), its terminal, and types `n` keys after `warmup` untimed ones. */
export async function terminalEcho(browser: Browser, sandboxUrl: string, key: string, n: number, warmup = 5): Promise<number[]> {
  const context = await newContext(browser);
  try {
    await context.addInitScript((k) => { window.sessionStorage.setItem('svc.console.apiKey', k); }, key);
    const page = await context.newPage();
    await page.goto(sandboxUrl);
    await page.getByRole('region', { name: 'Terminal' }).getByRole('button', { name: 'Open terminal' }).click();
    const term = page.getByRole('group', { name: 'Terminal' });
    await term.waitFor({ timeout: 15_000 });
    await page.waitForFunction(() => (document.querySelector('[aria-label="Terminal"] .xterm-rows')?.textContent ?? '').trim().length > 0, undefined, { timeout: 20_000 });
    await term.click();
    await page.evaluate((ch) => {
      const w = window;
      const rows = document.querySelector('[aria-label="Terminal"] .xterm-rows');
      const count = () => (rows.textContent.match(new RegExp(ch, 'g')) ?? []).length;
      w.benchEcho = { armed: false, before: 0, keyAt: 0, shownAt: undefined };
      document.addEventListener('keydown', () => {
        if (w.benchEcho.armed) w.benchEcho.keyAt = performance.now();
      }, { capture: true });
      new MutationObserver(() => {
        if (w.benchEcho.armed && w.benchEcho.shownAt === undefined && count() > w.benchEcho.before) w.benchEcho.shownAt = performance.now();
      }).observe(rows, { childList: true, subtree: true, characterData: true });
      w.benchEchoArm = () => { w.benchEcho = { armed: true, before: count(), keyAt: 0, shownAt: undefined }; };
    }, KEY);
    const samples: number[] = [];
    for (let i = 0; i < n + warmup; i++) {
      // A fresh line now and then: the keys stay on one screen row of the prompt.
      if (i % 25 === 24) {
        await page.keyboard.press('Control+U');
        await page.waitForTimeout(100);
      }
      await page.evaluate(() => window.benchEchoArm());
      await page.keyboard.press(KEY);
      await page.waitForFunction(() => window.benchEcho.shownAt !== undefined, undefined, { timeout: 10_000, polling: 'raf' });
      const ms = await page.evaluate(() => window.benchEcho.shownAt - window.benchEcho.keyAt);
      if (i >= warmup) samples.push(ms);
    }
    await page.keyboard.press('Control+U');
    return samples;
  } finally {
    await context.close();
  }
}
