/**
 * The sandbox list in Chromium, timed inside the page (performance.now, whose zero is the
 * navigation's start): the first row's paint on a fresh load, and the list with 1,000 rows, its
 * render after "Per page" becomes 1000 and a scroll from its top to its bottom. A row is one of the
 * table named "Sandboxes" holding a link (the sandbox's id), as docs/console.md's contract says.
 */
import { newContext } from '../test/e2e/browser.ts';
import type { Browser, Page } from 'playwright-core';

// Browser globals of the functions that run in the page (page.evaluate, addInitScript); this
// project's tsconfig has no DOM lib.
declare const document: any, window: any, sessionStorage: any, performance: any, requestAnimationFrame: any, MutationObserver: any, PerformanceObserver: any;

/** Installed before the console's script: keeps the key in sessionStorage and watches for rows. */
function watchRows(key: string): void {
  sessionStorage.setItem('svc.console.apiKey', key);
  const w = window;
  w.benchRows = { count: 0, firstRowAt: undefined, firstRowPaintAt: undefined, atCount: {} as Record<number, number>, longTasks: [] as number[] };
  const table = () => [...document.querySelectorAll('table')].find((t: any) => (t.caption?.textContent ?? t.getAttribute('aria-label') ?? '').trim() === 'Sandboxes');
  const count = () => {
    const t = table();
    return t ? [...t.querySelectorAll('tbody tr')].filter((r: any) => r.querySelector('a')).length : 0;
  };
  const check = () => {
    const n = count();
    w.benchRows.count = n;
    if (n > 0 && w.benchRows.firstRowAt === undefined) {
      w.benchRows.firstRowAt = performance.now();
      // The frame that draws it: its callback runs before that frame's paint.
      requestAnimationFrame(() => { w.benchRows.firstRowPaintAt = performance.now(); });
    }
    for (const target of w.benchRows.wanted ?? []) {
      if (n >= target && w.benchRows.atCount[target] === undefined) {
        w.benchRows.atCount[target] = performance.now();
        requestAnimationFrame(() => { w.benchRows.atCount[`${target}-paint`] = performance.now(); });
      }
    }
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true });
  new PerformanceObserver((list: any) => { for (const e of list.getEntries()) w.benchRows.longTasks.push(e.duration); }).observe({ type: 'longtask' });
}

/** ms from the navigation's start until the frame that paints the list's first row. */
export async function firstRowPaint(browser: Browser, listUrl: string, key: string): Promise<{ paintMs: number; fcpMs: number }> {
  const context = await newContext(browser);
  try {
    await context.addInitScript(watchRows, key);
    const page = await context.newPage();
    await page.goto(listUrl);
    await page.waitForFunction(() => window.benchRows.firstRowPaintAt !== undefined, undefined, { timeout: 20_000 });
    return await page.evaluate(() => ({
      paintMs: window.benchRows.firstRowPaintAt,
      fcpMs: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
    }));
  } finally {
    await context.close();
  }
}

export interface ThousandRows {
  /** From the "Per page" change to the frame that paints the 1,000th row. */
  renderMs: number;
  /** The browser's long tasks (> 50 ms) while rendering. */
  longTasksRender: number;
  scrollPx: number;
  /** A flick: wheel notches of 1,000 px sent back to back; from the first to the frame that shows the bottom. */
  flick: Scroll;
  /** Page by page: one viewport a frame, every row painted once; ideal: frames x 16.7 ms. */
  paged: Scroll;
  /** The floor: the same cells' text as a plain table with no style or script, page by page. */
  pagedFloor: Scroll;
}

export interface Scroll {
  ms: number;
  frames: number;
  /** Frames longer than 50 ms (gaps between animation frames), and the longest. */
  longFrames: number;
  longestFrameMs: number;
  /** The browser's long tasks (> 50 ms) meanwhile. */
  longTasks: number;
}

const NOTCH_PX = 1000;

export async function thousandRows(browser: Browser, listUrl: string, key: string, rows: number): Promise<ThousandRows> {
  const context = await newContext(browser);
  try {
    await context.addInitScript(watchRows, key);
    const page = await context.newPage();
    await page.goto(listUrl);
    await page.waitForFunction(() => window.benchRows.count > 0, undefined, { timeout: 20_000 });
    await page.evaluate((n) => {
      window.benchRows.wanted = [n];
      window.benchRows.longTasks = [];
      // The change's own moment, in the page: the select's change event as Playwright fires it.
      document.addEventListener('change', () => { window.benchRows.changedAt ??= performance.now(); }, { capture: true });
    }, rows);
    await page.getByLabel('Per page').selectOption(String(rows));
    await page.waitForFunction((n) => window.benchRows.atCount[`${n}-paint`] !== undefined, rows, { timeout: 60_000 });
    const render = await page.evaluate((n) => ({ ms: window.benchRows.atCount[`${n}-paint`] - window.benchRows.changedAt, longTasks: window.benchRows.longTasks.length }), rows);
    const scrollPx = await findScroller(page);
    const flick = await flickToBottom(page, scrollPx);
    const paged = await pageByPage(page);
    const cells: string[][] = await page.evaluate(() => {
      const t = [...document.querySelectorAll('table')].find((x: any) => (x.caption?.textContent ?? '').trim() === 'Sandboxes');
      return [...t.querySelectorAll('tbody tr')].map((tr: any) => [...tr.cells].map((td: any) => td.textContent));
    });
    return { renderMs: render.ms, longTasksRender: render.longTasks, scrollPx, flick, paged, pagedFloor: await plainTablePaged(browser, cells) };
  } finally {
    await context.close();
  }
}

/** The floor of the page-by-page pass: the list's text as a bare table in a page of its own (a page in the background gets no animation frames). */
async function plainTablePaged(browser: Browser, cells: string[][]): Promise<Scroll> {
  const context = await newContext(browser);
  try {
    const page = await context.newPage();
    const esc = (v: string) => v.replace(/&/g, '&amp;').replace(/</g, '&lt;');
    await page.setContent(`<table><caption>Sandboxes</caption><tbody>${cells.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('')}</tbody></table>`);
    await findScroller(page);
    return await pageByPage(page);
  } finally {
    await context.close();
  }
}

/** Keeps the table's scroller on the page (its nearest ancestor that scrolls vertically, else the page) at its top; answers how far it scrolls. */
async function findScroller(page: Page): Promise<number> {
  return page.evaluate(() => {
    const t = [...document.querySelectorAll('table')].find((x: any) => (x.caption?.textContent ?? x.getAttribute('aria-label') ?? '').trim() === 'Sandboxes');
    let el = document.scrollingElement;
    for (let up = t?.parentElement; up; up = up.parentElement) {
      if (/(auto|scroll)/.test(window.getComputedStyle(up).overflowY) && up.scrollHeight > up.clientHeight + 1) { el = up; break; }
    }
    el.scrollTop = 0;
    window.benchScroller = el;
    return el.scrollHeight - el.clientHeight;
  });
}

/** Watches frames and long tasks from `start` until the scroller is at its bottom; `window.benchScroll` holds the tally. */
function armScroll(): void {
  const w = window;
  const el = w.benchScroller;
  const s = { start: undefined as number | undefined, end: undefined as number | undefined, frames: [] as number[], longTasks: 0 };
  w.benchScroll = s;
  const atBottom = () => el.scrollTop + el.clientHeight >= el.scrollHeight - 1;
  new PerformanceObserver((list: any) => { if (s.start !== undefined && s.end === undefined) s.longTasks += list.getEntries().length; }).observe({ type: 'longtask' });
  let last = performance.now();
  const frame = (t: number) => {
    if (s.start !== undefined) s.frames.push(t - last);
    last = t;
    // The frame whose callback first finds the bottom is the one that paints it.
    if (s.start !== undefined && atBottom()) { s.end = t; return; }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

async function tally(page: Page): Promise<Scroll> {
  await page.waitForFunction(() => window.benchScroll.end !== undefined, undefined, { timeout: 120_000 });
  const r = await page.evaluate(() => window.benchScroll);
  const frames = r.frames as number[];
  return { ms: r.end - r.start, frames: frames.length, longFrames: frames.filter((f) => f > 50).length, longestFrameMs: Math.round(Math.max(0, ...frames)), longTasks: r.longTasks };
}

/** Wheel notches over the table, sent back to back as a fast flick of a mouse wheel does (the browser coalesces them). */
async function flickToBottom(page: Page, px: number): Promise<Scroll> {
  const box = await page.getByRole('table', { name: 'Sandboxes' }).boundingBox();
  const at = { x: 640, y: Math.min(700, Math.max(100, (box?.y ?? 100) + 50)) };
  await page.evaluate(armScroll);
  await page.evaluate(() => {
    const w = window;
    w.addEventListener('wheel', () => { w.benchScroll.start ??= performance.now(); }, { capture: true, passive: true });
  });
  const cdp = await page.context().newCDPSession(page);
  const notches = Math.ceil(px / NOTCH_PX) + 2;
  await Promise.all(Array.from({ length: notches }, () => cdp.send('Input.dispatchMouseEvent', { type: 'mouseWheel', ...at, deltaX: 0, deltaY: NOTCH_PX })));
  await cdp.detach();
  return tally(page);
}

/** One viewport a frame from the top: every row is drawn once, as reading down the list does. */
async function pageByPage(page: Page): Promise<Scroll> {
  await page.evaluate(() => { window.benchScroller.scrollTop = 0; });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await page.evaluate(armScroll);
  await page.evaluate(() => {
    const w = window;
    const el = w.benchScroller;
    w.benchScroll.start = performance.now();
    const step = () => {
      if (w.benchScroll.end !== undefined) return;
      el.scrollTop += el.clientHeight;
      requestAnimationFrame(step);
    };
    step();
  });
  return tally(page);
}
