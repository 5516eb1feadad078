/**
 * The web console's screenshots for the docs (docs/images/console-*.png): brings a platform up
 * (test/e2e/harness.ts, on the e2e ports: not beside an e2e test), gives its pages something to
 * show (sandboxes with metadata, one paused and one ended, a webhook with a delivery, a snapshot,
 * a volume, an API key, a template build with a log), and photographs the main pages at 1280x800,
 * the list at 390x844, and a sandbox's page in the dark scheme.
 *
 *   node --import tsx scripts/console-screenshots.ts
 * Needs `npm run build`; about a minute with the base's root filesystem cached (a first build of
 * the base template in a new data dir each run). Each image is checked to stay under 200 KB.
 */
import { createServer } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Template, Volume } from 'e2b';
import type { Browser, Page } from 'playwright-core';
import { REPO, startPlatform, useE2bEnv, waitFor, type RunningPlatform } from '../test/e2e/harness.ts';
import { launchBrowser, openPage, openSignedIn, type ContextOptions } from '../test/e2e/browser.ts';
import { region, table, terminal, terminalText } from '../test/e2e/console-page.ts';

const OUT = join(REPO, 'docs/images');
const MAX_BYTES = 200 * 1024;
const progress = (what: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${what}\n`);

async function api(p: RunningPlatform, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${p.apiUrl}${path}`, { method, headers: { 'X-API-Key': p.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** Writes one image and fails on a script error of the page or an image over 200 KB. */
async function shoot(page: Page, errors: string[], name: string): Promise<void> {
  // Clocks ("12 s ago") and charts settle, and the caret of a focused field stops blinking into the image.
  await page.waitForTimeout(600);
  const file = join(OUT, `console-${name}.png`);
  await page.screenshot({ path: file, animations: 'disabled', caret: 'hide' });
  const bytes = statSync(file).size;
  const own = errors.filter((e) => !/favicon\.ico/.test(e));
  if (own.length) throw new Error(`${name}: the page logged errors: ${own.join('; ')}`);
  if (bytes > MAX_BYTES) throw new Error(`${name}: ${bytes} bytes, over ${MAX_BYTES}`);
  progress(`wrote ${file} (${Math.round(bytes / 1024)} KB)`);
}

async function signedIn(browser: Browser, p: RunningPlatform, route: string, opts: ContextOptions = {}) {
  return openSignedIn(browser, `${p.apiUrl}/dashboard/#/${route}`, p.apiKey, opts);
}

async function main() {
  mkdirSync(OUT, { recursive: true });
  const receiver = createServer((q, s) => { q.resume(); q.on('end', () => s.end()); });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  // A data dir of its own, new each run: the pages show what this script made, not what tests left.
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-console-shots-'));
  progress(`starting the platform in ${dataDir} (a first build of the base template)`);
  const p = await startPlatform({ dataDir, env: { SVC_ADDRESS_POOL: '10.218.0.0/16' } });
  useE2bEnv(p);
  const browser = await launchBrowser();
  const made: Sandbox[] = [];
  try {
    await api(p, 'POST', '/events/webhooks', {
      name: 'ci-notify', url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks/svc`, signatureSecret: 'screenshot-secret',
      events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.paused', 'sandbox.lifecycle.killed'],
    });
    progress('creating sandboxes, a snapshot, a volume');
    const meta: Array<Record<string, string>> = [{ app: 'web', owner: 'ana' }, { app: 'worker', owner: 'li', stage: 'ci' }, { app: 'notebook', owner: 'sam' }];
    for (const metadata of meta) made.push(await Sandbox.create('base', { metadata, timeoutMs: 1_800_000 }));
    // One that ran and ended: the list shows ended sandboxes too.
    await (await Sandbox.create('base', { metadata: { app: 'migrate', owner: 'ana' } })).kill();
    await made[0]!.commands.run('mkdir -p /home/user/app && echo ready > /home/user/app/status');
    // Some work for the charts until the screenshots: CPU in bursts, memory held (written, so resident), files written.
    await made[0]!.commands.run('for i in $(seq 1 12); do timeout 3 sh -c "while :; do :; done"; sleep 2; done', { background: true });
    await made[0]!.commands.run('python3 -c "import time; b = b\'x\' * (120 << 20); time.sleep(90)"', { background: true });
    await made[0]!.commands.run('head -c 60000000 /dev/urandom > /home/user/app/data.bin');
    await made[2]!.createSnapshot();
    await made[2]!.pause();
    await Volume.create('datasets');
    await api(p, 'POST', '/api-keys', { name: 'ci-deploy' });

    progress('a template build');
    const name = 'web-app';
    const steps = Template().fromTemplate('base')
      .runCmd('for s in fetch compile test package; do echo "step $s: ok"; sleep 1; done', { user: 'root' })
      .runCmd('echo built > /home/user/built.txt');
    const build = await Template.buildInBackground(steps, name);
    await waitFor('the build to finish', async () => {
      const s = await Template.getBuildStatus(build);
      if (s.status === 'error') throw new Error(`the demo build failed: ${JSON.stringify(s.reason)}`);
      return s.status === 'ready' ? true : undefined;
    }, 300_000);
    // Metrics every 5 s: a few samples on the charts.
    await new Promise((r) => setTimeout(r, 12_000));

    progress('screenshots');
    {
      const { page, errors } = await openPage(browser, `${p.apiUrl}/dashboard/`);
      await page.getByLabel('API key').waitFor();
      await shoot(page, errors, 'sign-in');
      await page.context().close();
    }
    {
      const { page, errors } = await signedIn(browser, p, 'sandboxes');
      await table(page, 'Sandboxes').getByRole('link', { name: made[0]!.sandboxId }).waitFor();
      await shoot(page, errors, 'sandboxes');
      await page.context().close();
    }
    {
      const { page, errors } = await signedIn(browser, p, 'sandboxes', { viewport: { width: 390, height: 844 } });
      await table(page, 'Sandboxes').getByRole('link', { name: made[0]!.sandboxId }).waitFor();
      await shoot(page, errors, 'sandboxes-phone');
      await page.context().close();
    }
    for (const scheme of ['light', 'dark'] as const) {
      const { page, errors } = await signedIn(browser, p, `sandboxes/${made[0]!.sandboxId}`, { colorScheme: scheme });
      await page.getByRole('img', { name: /^CPU: .+ now, \d+ samples$/ }).waitFor({ timeout: 20_000 });
      if (scheme === 'dark') {
        await shoot(page, errors, 'sandbox-dark');
      } else {
        // The charts whole, with the events and the log under them.
        await region(page, 'Metrics').evaluate((el) => el.scrollIntoView());
        await page.evaluate('window.scrollBy(0, -16)');
        await shoot(page, errors, 'sandbox');
        await region(page, 'Terminal').getByRole('button', { name: 'Open terminal' }).click();
        await terminal(page).waitFor();
        await waitFor('the prompt', async () => ((await terminalText(page)).trim() ? true : undefined), 20_000);
        await terminal(page).click();
        await page.keyboard.type('cat app/status; uname -sr; ls /home/user');
        await page.keyboard.press('Enter');
        await waitFor('the output', async () => ((await terminalText(page)).includes('ready') ? true : undefined), 10_000);
        await region(page, 'Terminal').scrollIntoViewIfNeeded();
        await page.evaluate('window.scrollBy(0, -120)');
        await shoot(page, errors, 'sandbox-terminal');
      }
      await page.context().close();
    }
    const webhooks = async (pg: Page) => {
      await table(pg, 'Webhooks').getByRole('row').nth(1).waitFor();
      await region(pg, 'Webhooks').evaluate((el) => el.scrollIntoView());
    };
    const pages: Array<[string, string, (pg: Page) => Promise<unknown>]> = [
      ['templates', 'templates', (pg) => table(pg, 'Templates').getByRole('link', { name }).waitFor()],
      ['build', `templates/${build.templateId}/builds/${build.buildId}`, (pg) => waitFor('the log', async () => ((await region(pg, 'Build log').innerText()).includes('step package') ? true : undefined), 15_000)],
      ['snapshots', 'snapshots', (pg) => table(pg, 'Snapshots').getByRole('row').nth(1).waitFor()],
      ['volumes', 'volumes', (pg) => table(pg, 'Volumes').getByRole('row').nth(1).waitFor()],
      ['team', 'team', (pg) => pg.getByRole('img', { name: /^Concurrent sandboxes: / }).waitFor()],
      ['team-webhooks', 'team', webhooks],
      ['admin', 'admin', (pg) => table(pg, 'Nodes').getByRole('row').nth(1).waitFor()],
    ];
    for (const [file, route, ready] of pages) {
      const { page, errors } = await signedIn(browser, p, route);
      await ready(page);
      await shoot(page, errors, file);
      await page.context().close();
    }
  } finally {
    // The template, snapshot and volume go with the data dir.
    for (const s of made) await Sandbox.kill(s.sandboxId);
    await browser.close();
    await p.stop();
    receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
