/**
 * The web console (docs/console.md) against the whole platform, in a real browser: sign-in, the
 * sandbox list following what the official SDK does, a sandbox's page (charts, events, Pause,
 * Resume, Kill, the terminal), a template build's log following live, every page free of script
 * errors, keyboard focus, a phone-sized window and the dark scheme. Pages are read by the names
 * and roles of the UI contract only (test/e2e/console-page.ts).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, Template } from 'e2b';
import type { Browser, Page } from 'playwright-core';
import { startPlatform, useE2bEnv, diagnoseFailures, waitFor, type RunningPlatform } from './harness.ts';
import { launchBrowser, openPage, openSignedIn, signIn } from './browser.ts';
import { cellText, fact, region, rowWithLink, signInErrors, table, terminal, terminalText } from './console-page.ts';
import { adminPage, restOf, setTimeoutAndSnapshot, storagePages, teamPage } from './console-actions.ts';

// Browser globals of the functions that run in the page (page.evaluate); this project's tsconfig has no DOM lib.
declare const document: any, window: any, sessionStorage: any, getComputedStyle: any;

const RUN = Date.now().toString(36);
let p: RunningPlatform;
let browser: Browser;
let consoleUrl: string;
/** The SDK's sandbox the list, its page, the terminal and the actions are checked on. */
let sbx: Sandbox | undefined;
/** Its page, kept open from the charts to Kill, as a person works on one sandbox. */
let sbxPage: { page: Page; errors: string[] } | undefined;
let build: { templateId: string; buildId: string; name: string } | undefined;
/** The snapshot the sandbox page's Snapshot took, deleted on the Snapshots page. */
let snapshotId: string | undefined;

diagnoseFailures(() => p);
before(async () => {
  p = await startPlatform();
  useE2bEnv(p);
  consoleUrl = `${p.apiUrl}/dashboard/`;
  browser = await launchBrowser();
});
after(async () => {
  // Whatever a failed test left: every sandbox of this run, and the template it built.
  const left = await Sandbox.list({ query: { metadata: { run: RUN } } }).nextItems().catch((err: Error) => {
    console.error(`listing this run's sandboxes failed: ${err.message}`); // kill what is known below
    return sbx ? [{ sandboxId: sbx.sandboxId }] : [];
  });
  for (const s of left) await Sandbox.kill(s.sandboxId);
  if (build) await fetch(`${p.apiUrl}/templates/${build.templateId}`, { method: 'DELETE', headers: { 'X-API-Key': p.apiKey } });
  await browser?.close();
  await p?.stop();
});

const h1 = (page: Page, name: string) => page.getByRole('heading', { level: 1, name, exact: true });

test('the files: /dashboard redirects to /dashboard/, the page carries its CSP, a missing file is a JSON 404', async () => {
  const bare = await fetch(`${p.apiUrl}/dashboard`, { redirect: 'manual' });
  assert.ok([301, 302, 308].includes(bare.status), `/dashboard answers a redirect, not ${bare.status}`);
  assert.equal(bare.headers.get('location'), '/dashboard/', 'the redirect goes to /dashboard/');
  const index = await fetch(consoleUrl);
  assert.equal(index.status, 200, 'the page is served');
  const csp = index.headers.get('content-security-policy') ?? '';
  assert.ok(csp.includes("default-src 'self'") && csp.includes("frame-ancestors 'none'"), `the page carries its CSP: "${csp}"`);
  const missing = await fetch(`${p.apiUrl}/dashboard/nosuchfile`);
  assert.equal(missing.status, 404, 'a missing file is a 404');
  assert.match(missing.headers.get('content-type') ?? '', /application\/json/, 'the 404 is JSON');
  const body = await missing.json() as { message?: string };
  assert.ok(body.message?.includes('nosuchfile'), `the 404 names the file: ${JSON.stringify(body)}`);
});

test('sign-in: a wrong key is refused with an alert and nothing else shown; the right key opens the console', async () => {
  const { page, errors } = await openPage(browser, consoleUrl);
  try {
    await signIn(page, `e2b_${'0'.repeat(40)}`);
    const alert = page.getByRole('alert');
    await alert.waitFor({ timeout: 10_000 });
    assert.match(await alert.innerText(), /refused|401/i, 'the alert says the key was refused');
    assert.equal(await page.getByRole('navigation').count(), 0, 'a refused key shows no navigation');
    assert.equal(await page.getByRole('table').count(), 0, 'a refused key shows no data');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('svc.console.apiKey')), null, 'a refused key is not kept');

    await page.getByLabel('API key').fill('');
    await signIn(page, p.apiKey);
    await page.getByRole('navigation', { name: 'Main' }).waitFor({ timeout: 10_000 });
    await h1(page, 'Sandboxes').waitFor({ timeout: 10_000 });
    assert.equal(await page.getByRole('alert').count(), 0, 'signed in, no alert is left');
    assert.ok(await page.getByRole('link', { name: 'Admin', exact: true }).isVisible(), 'the admin key sees the Admin link');
    assert.deepEqual(signInErrors(errors), [], 'no script errors beside the refused key\'s 401');
  } finally {
    await page.context().close();
  }
});

test('keyboard: Tab reaches the Sign in button and its focus is visible', async () => {
  const { page, errors } = await openPage(browser, consoleUrl);
  try {
    await page.getByLabel('API key').waitFor();
    let reached = false;
    for (let i = 0; i < 10 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.tagName === 'BUTTON' && document.activeElement.textContent?.trim() === 'Sign in');
    }
    assert.ok(reached, 'Tab reaches the Sign in button within 10 presses');
    const outline = await page.evaluate(() => {
      const s = getComputedStyle(document.activeElement!);
      return { style: s.outlineStyle, width: parseFloat(s.outlineWidth) };
    });
    assert.ok(outline.style !== 'none' && outline.width > 0, `the focused button shows an outline (${JSON.stringify(outline)})`);
    assert.deepEqual(errors, [], 'no script errors');
  } finally {
    await page.context().close();
  }
});

test('sandbox list: a sandbox the SDK creates appears without a reload, with its state, template and metadata', async () => {
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/sandboxes`, p.apiKey);
  try {
    const list = table(page, 'Sandboxes');
    await list.waitFor({ timeout: 10_000 });
    await page.evaluate(() => { window.notReloaded = true; });
    sbx = await Sandbox.create('base', { metadata: { console: 'e2e', run: RUN }, timeoutMs: 600_000 });
    const created = Date.now();
    const link = list.getByRole('link', { name: sbx.sandboxId, exact: true });
    await link.waitFor({ timeout: 8_000 });
    const seenAfter = Date.now() - created;
    assert.ok(seenAfter < 6_000, `the sandbox appears within a few seconds of its create (${seenAfter} ms)`);
    assert.ok(await page.evaluate(() => window.notReloaded === true), 'the list followed without a reload');
    assert.equal(await link.getAttribute('href'), `#/sandboxes/${sbx.sandboxId}`, 'the id links to the sandbox\'s page');
    const row = rowWithLink(list, sbx.sandboxId);
    assert.equal(await cellText(list, row, 'State'), 'running', 'the State cell says running');
    assert.match(await cellText(list, row, 'Template'), /base/, 'the Template cell names the template');
    const meta = await cellText(list, row, 'Metadata');
    assert.ok(meta.includes(`run=${RUN}`) && meta.includes('console=e2e'), `the Metadata cell shows key=value pairs: "${meta}"`);
    for (const column of ['ID', 'Runtime', 'Started', 'Ends', 'CPU', 'Memory']) await cellText(list, row, column);

    // The Metadata filter: another run's key hides the row, this run's shows it.
    const filter = page.getByLabel('Metadata', { exact: true });
    await filter.fill('run=nosuchrun');
    await waitFor('the filter to hide the sandbox', async () => ((await link.count()) === 0 ? true : undefined), 8_000);
    await filter.fill(`run=${RUN}`);
    await link.waitFor({ timeout: 8_000 });
    assert.deepEqual(errors, [], 'no script errors');
  } finally {
    await page.context().close();
  }
});

test('a phone-sized window shows the list without the page scrolling sideways', async () => {
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/sandboxes`, p.apiKey, { viewport: { width: 390, height: 844 } });
  try {
    await table(page, 'Sandboxes').getByRole('link', { name: sbx!.sandboxId, exact: true }).waitFor({ timeout: 10_000 });
    const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, body: document.body.scrollWidth, window: window.innerWidth }));
    assert.ok(widths.page <= widths.window && widths.body <= widths.window, `nothing overflows the 390 px window sideways (${JSON.stringify(widths)})`);
    assert.ok(await page.getByRole('navigation', { name: 'Main' }).isVisible(), 'the navigation is there');
    assert.deepEqual(errors, [], 'no script errors');
  } finally {
    await page.context().close();
  }
});

test('the dark scheme renders: the background differs from the light one', async () => {
  const colours = async (scheme: 'light' | 'dark') => {
    const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/sandboxes`, p.apiKey, { colorScheme: scheme });
    try {
      await table(page, 'Sandboxes').waitFor({ timeout: 10_000 });
      assert.deepEqual(errors, [], `no script errors in the ${scheme} scheme`);
      return await page.evaluate(() => ({ bg: getComputedStyle(document.body).backgroundColor, fg: getComputedStyle(document.body).color }));
    } finally {
      await page.context().close();
    }
  };
  const light = await colours('light');
  const dark = await colours('dark');
  assert.notEqual(dark.bg, light.bg, `the dark background (${dark.bg}) differs from the light (${light.bg})`);
  assert.notEqual(dark.fg, light.fg, `the dark text colour (${dark.fg}) differs from the light (${light.fg})`);
});

test('sandbox page: the CPU, Memory and Disk charts fill with samples, and the lifecycle events show its create', async () => {
  const id = sbx!.sandboxId;
  sbxPage = await openSignedIn(browser, `${consoleUrl}#/sandboxes`, p.apiKey);
  const { page, errors } = sbxPage;
  await table(page, 'Sandboxes').getByRole('link', { name: id, exact: true }).click();
  await h1(page, id).waitFor({ timeout: 10_000 });
  assert.equal((await fact(page, 'State').innerText()).trim(), 'running', 'the State fact says running');
  // Samples come every 5 s: two of each within 20 s of the create.
  for (const chart of ['CPU', 'Memory', 'Disk']) {
    const named = page.getByRole('img', { name: new RegExp(`^${chart}: .+ now, \\d+ samples$`) });
    await named.waitFor({ timeout: 20_000 });
    await waitFor(`two ${chart} samples`, async () => {
      const n = Number(/(\d+) samples$/.exec((await named.getAttribute('aria-label')) ?? '')?.[1]);
      return n >= 2 ? n : undefined;
    }, 20_000);
  }
  const events = region(page, 'Lifecycle events').getByRole('table');
  await waitFor('the created event', async () => ((await events.innerText()).includes('created') ? true : undefined), 10_000);
  for (const name of ['Logs', 'Metadata', 'Network', 'Volumes', 'Terminal']) assert.ok(await region(page, name).isVisible(), `the page has a "${name}" region`);
  assert.match(await region(page, 'Metadata').innerText(), new RegExp(RUN), 'the Metadata region shows the SDK\'s metadata');
  assert.ok(await region(page, 'Logs').getByRole('log').count() === 1, 'the Logs region holds a log');
  assert.deepEqual(errors, [], 'no script errors');
});

test('terminal: a command typed into it prints its output', async () => {
  const { page, errors: all } = sbxPage!;
  const since = all.length;
  const errors = () => all.slice(since);
  const section = region(page, 'Terminal');
  await section.getByRole('button', { name: 'Open terminal' }).click();
  await terminal(page).waitFor({ timeout: 15_000 });
  // The shell's prompt first: keys typed before the connection opens would have nowhere to go.
  await waitFor('the shell\'s prompt', async () => ((await terminalText(page)).trim() ? true : undefined), 15_000)
    .catch((err: Error) => { throw new Error(`${err.message}; the page's errors: ${JSON.stringify(errors())}`); });
  await terminal(page).click();
  await page.keyboard.type('echo console-$((6*7))');
  await page.keyboard.press('Enter');
  await waitFor('the command\'s output in the terminal', async () => (/^console-42\s*$/m.test(await terminalText(page)) ? true : undefined), 10_000)
    .catch(async (err: Error) => { throw new Error(`${err.message}; the terminal shows:\n${await terminalText(page)}`); });
  await section.getByRole('button', { name: 'Close terminal' }).click();
  await waitFor('the terminal to close', async () => ((await terminal(page).count()) === 0 ? true : undefined), 5_000);
  assert.ok(await section.getByRole('button', { name: 'Open terminal' }).isVisible(), 'closed, it can be opened again');
  assert.deepEqual(errors(), [], 'no script errors');
});

test('Set timeout (an empty one refused first) and Snapshot act, as the SDK sees', async () => {
  const { page, errors } = sbxPage!;
  const since = errors.length;
  snapshotId = await setTimeoutAndSnapshot(page, sbx!.sandboxId);
  assert.deepEqual(errors.slice(since), [], 'no script errors');
});

test('Pause, Resume and Kill (after its confirmation) act, as the SDK sees', async () => {
  const { page, errors: all } = sbxPage!;
  // This test's own: a failed terminal test before it leaves its errors on the same page.
  const since = all.length;
  const id = sbx!.sandboxId;
  const state = async () => (await Sandbox.getInfo(id)).state;
  const shows = (s: string) => waitFor(`the State fact to say ${s}`, async () => ((await fact(page, 'State').innerText()).trim() === s ? true : undefined), 15_000);

  await page.getByRole('button', { name: 'Pause', exact: true }).click();
  await waitFor('the SDK to see it paused', async () => ((await state()) === 'paused' ? true : undefined), 30_000);
  await shows('paused');
  await page.getByRole('button', { name: 'Resume', exact: true }).click();
  await waitFor('the SDK to see it running', async () => ((await state()) === 'running' ? true : undefined), 30_000);
  await shows('running');

  await page.getByRole('button', { name: 'Kill', exact: true }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor({ timeout: 5_000 });
  assert.equal(await state(), 'running', 'Kill asks first: the sandbox runs on while the dialog is open');
  await dialog.getByRole('button', { name: 'Kill sandbox' }).click();
  await waitFor('the SDK to no longer list it', async () => {
    const listed = await Sandbox.list({ query: { metadata: { run: RUN } } }).nextItems();
    return listed.some((s) => s.sandboxId === id) ? undefined : true;
  }, 30_000);
  await shows('ended');
  sbx = undefined;
  assert.deepEqual(all.slice(since), [], 'no script errors');
});

test('template build: its log follows live on the build\'s page until the build is ready', async () => {
  const name = `e2e-console-${RUN}`;
  const steps = Template().fromTemplate('base').runCmd(`for i in 1 2 3 4 5 6 7 8; do echo console-build-$i; sleep 1; done # ${name}`);
  const info = await Template.buildInBackground(steps, name);
  build = { templateId: info.templateId, buildId: info.buildId, name };
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/templates/${info.templateId}/builds/${info.buildId}`, p.apiKey);
  try {
    const log = region(page, 'Build log').getByRole('log');
    await log.waitFor({ timeout: 10_000 });
    const early = await waitFor('the first line in the page', async () => {
      const text = await log.innerText();
      return text.includes('console-build-1') ? text : undefined;
    }, 90_000);
    assert.ok(!early.includes('console-build-8'), 'the first line showed before the last was printed: the log follows live');
    assert.notEqual((await Template.getBuildStatus(info)).status, 'ready', 'the build was still running when its first line showed');
    await waitFor('the last line without a reload', async () => ((await log.innerText()).includes('console-build-8') ? true : undefined), 30_000);
    await waitFor('the Status fact to say ready', async () => (/ready/i.test(await fact(page, 'Status').innerText()) ? true : undefined), 60_000);
    assert.deepEqual(errors, [], 'no script errors');
  } finally {
    await page.context().close();
  }
});

test('every page opens with no script error and no failed call', async () => {
  const killedId = sbxPage ? /#\/sandboxes\/(.+)$/.exec(sbxPage.page.url())?.[1] : undefined;
  await sbxPage?.page.context().close();
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/sandboxes`, p.apiKey);
  try {
    const pages: Array<[string, (pg: Page) => Promise<unknown>]> = [
      ['sandboxes', (pg) => h1(pg, 'Sandboxes').waitFor()],
      ...(killedId ? [[`sandboxes/${killedId}`, (pg: Page) => h1(pg, decodeURIComponent(killedId)).waitFor()] as [string, (pg: Page) => Promise<unknown>]] : []),
      ['templates', (pg) => table(pg, 'Templates').waitFor()],
      ...(build ? [
        [`templates/${build.templateId}`, (pg: Page) => table(pg, 'Builds').getByRole('link', { name: `Build ${build!.buildId}` }).waitFor()],
        [`templates/${build.templateId}/builds/${build.buildId}`, (pg: Page) => region(pg, 'Build log').waitFor()],
      ] as Array<[string, (pg: Page) => Promise<unknown>]> : []),
      ['snapshots', (pg) => table(pg, 'Snapshots').waitFor()],
      ['volumes', (pg) => table(pg, 'Volumes').waitFor()],
      ['team', (pg) => region(pg, 'Webhooks').waitFor()],
      ['admin', (pg) => table(pg, 'Nodes').waitFor()],
    ];
    for (const [route, ready] of pages) {
      await page.goto(`${consoleUrl}#/${route}`);
      await ready(page).catch((err: Error) => { throw new Error(`#/${route} did not show what it should: ${err.message}`); });
      // A page's first calls and one refresh.
      await page.waitForTimeout(1_500);
      const alerts = await page.getByRole('alert').allInnerTexts();
      assert.deepEqual(alerts, [], `#/${route} shows no error`);
      assert.equal(await page.getByRole('heading', { level: 1 }).count(), 1, `#/${route} has one h1`);
      assert.deepEqual(errors, [], `#/${route} has no script errors`);
    }
  } finally {
    await page.context().close();
  }
});

test('snapshots and volumes: the snapshot deleted after its confirmation; a volume created (an empty name refused first) and deleted', async () => {
  assert.ok(snapshotId, 'the sandbox page took a snapshot');
  const errors = await storagePages(browser, consoleUrl, p.apiKey, snapshotId!, `e2e-console-${RUN}`);
  assert.deepEqual(errors, [], 'no script errors');
});

test('team: the usage range and charts; a webhook created, disabled and deleted; an API key shown once, then revoked', async () => {
  const errors = await teamPage(browser, consoleUrl, restOf(p), p.apiKey, `e2e-console-${RUN}`);
  assert.deepEqual(errors, [], 'no script errors');
});

// Last: a drained node takes no new sandbox until it is undrained.
test('admin: a team\'s quotas saved; the node drained after its confirmation, then undrained', async () => {
  const errors = await adminPage(browser, consoleUrl, restOf(p), p.apiKey);
  assert.deepEqual(errors, [], 'no script errors');
});
