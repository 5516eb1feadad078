/**
 * The console's actions beyond a sandbox's lifecycle, each done as a person does it (by the names
 * of docs/console.md's UI contract) and checked through the API or the official SDK: a sandbox's
 * Set timeout and Snapshot; deleting a snapshot, creating and deleting a volume; a webhook created,
 * disabled and deleted; an API key shown once and revoked; a team's quotas saved; a node drained
 * and undrained. Used by test/e2e/console.test.ts.
 */
import assert from 'node:assert/strict';
import { Sandbox, Volume } from 'e2b';
import type { Browser, Page } from 'playwright-core';
import { openSignedIn } from './browser.ts';
import { region, table } from './console-page.ts';
import { waitFor, type RunningPlatform } from './harness.ts';

type Call = (method: string, path: string, body?: unknown, key?: string) => Promise<{ status: number; json: any }>;

export function restOf(p: RunningPlatform): Call {
  return async (method, path, body, key = p.apiKey) => {
    const res = await fetch(`${p.apiUrl}${path}`, { method, headers: { 'X-API-Key': key, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
}

const button = (page: Page, name: string) => page.getByRole('button', { name, exact: true });

/** Confirms the open dialog with its `confirm` button. */
async function confirm(page: Page, confirmName: string): Promise<void> {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor({ timeout: 5_000 });
  await dialog.getByRole('button', { name: confirmName, exact: true }).click();
}

/** On a running sandbox's page: Set timeout, then Snapshot; answers the snapshot's id. */
export async function setTimeoutAndSnapshot(page: Page, sandboxId: string): Promise<string> {
  await button(page, 'Set timeout').click();
  const field = page.getByLabel('Timeout (seconds)', { exact: true });
  await field.fill('');
  await button(page, 'Save timeout').click();
  await page.getByRole('alert').filter({ hasText: /Timeout/ }).waitFor({ timeout: 5_000 })
    .catch((err: Error) => { throw new Error(`an empty timeout is refused with an alert before the call: ${err.message}`); });
  await field.fill('900');
  const asked = Date.now();
  await button(page, 'Save timeout').click();
  await waitFor('the SDK to see the new end', async () => {
    const left = (await Sandbox.getInfo(sandboxId)).endAt.getTime() - asked;
    return Math.abs(left - 900_000) < 30_000 ? true : undefined;
  }, 10_000);

  await button(page, 'Snapshot').click();
  const status = page.getByRole('status').filter({ hasText: /^Snapshot \S+ created$/ });
  await status.waitFor({ timeout: 60_000 });
  const snapshotId = /^Snapshot (\S+) created$/.exec((await status.innerText()).trim())![1]!;
  const listed = await Sandbox.listSnapshots({ sandboxId }).nextItems();
  assert.ok(listed.some((s) => s.snapshotId === snapshotId), `the SDK lists the snapshot ${snapshotId} (${JSON.stringify(listed.map((s) => s.snapshotId))})`);
  return snapshotId;
}

/** Snapshots: deleting `snapshotId` after its confirmation. Volumes: an empty name refused, one created and deleted. */
export async function storagePages(browser: Browser, consoleUrl: string, key: string, snapshotId: string, volumeName: string): Promise<string[]> {
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/snapshots`, key);
  try {
    const del = page.getByRole('button', { name: `Delete snapshot ${snapshotId}`, exact: true });
    await del.waitFor({ timeout: 10_000 });
    await del.click();
    await confirm(page, 'Delete snapshot');
    await waitFor('the snapshot to go', async () => ((await Sandbox.listSnapshots({ name: snapshotId }).nextItems()).some((s) => s.snapshotId === snapshotId) ? undefined : true), 15_000);
    await waitFor('its row to go', async () => ((await del.count()) === 0 ? true : undefined), 10_000);

    await page.goto(`${consoleUrl}#/volumes`);
    await table(page, 'Volumes').waitFor({ timeout: 10_000 });
    await button(page, 'Create volume').click();
    await page.getByRole('alert').waitFor({ timeout: 5_000 })
      .catch((err: Error) => { throw new Error(`an empty volume name is refused with an alert before the call: ${err.message}`); });
    await page.getByLabel('Volume name', { exact: true }).fill(volumeName);
    await button(page, 'Create volume').click();
    const delVolume = page.getByRole('button', { name: `Delete volume ${volumeName}`, exact: true });
    await delVolume.waitFor({ timeout: 10_000 });
    assert.ok((await Volume.list()).some((v) => v.name === volumeName), 'the SDK lists the volume created');
    await delVolume.click();
    await confirm(page, 'Delete volume');
    await waitFor('the volume to go', async () => ((await Volume.list()).some((v) => v.name === volumeName) ? undefined : true), 15_000);
    await waitFor('its row to go', async () => ((await delVolume.count()) === 0 ? true : undefined), 10_000);
    return errors;
  } finally {
    await page.context().close();
  }
}

/** Team: the usage controls; a webhook created, disabled, deleted; an API key shown once and revoked. */
export async function teamPage(browser: Browser, consoleUrl: string, rest: Call, key: string, name: string): Promise<string[]> {
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/team`, key);
  try {
    const usage = region(page, 'Usage');
    await usage.waitFor({ timeout: 10_000 });
    const range = usage.getByLabel('Range', { exact: true });
    assert.deepEqual((await range.locator('option').allInnerTexts()).map((t) => t.trim()), ['Last hour', 'Last day', 'Last week'], 'the Range choices');
    for (const chart of ['Concurrent sandboxes', 'Start rate']) await usage.getByRole('img', { name: new RegExp(`^${chart}: `) }).waitFor({ timeout: 10_000 });
    await range.selectOption({ label: 'Last day' });

    const hooks = region(page, 'Webhooks');
    await hooks.getByLabel('Webhook name', { exact: true }).fill(name);
    await hooks.getByLabel('Webhook URL', { exact: true }).fill('http://127.0.0.1:9/console-e2e');
    await hooks.getByLabel('Secret', { exact: true }).fill('console-e2e-secret');
    await hooks.getByRole('checkbox', { name: 'sandbox.lifecycle.killed', exact: true }).check();
    await button(page, 'Create webhook').click();
    const disable = page.getByRole('button', { name: `Disable webhook ${name}`, exact: true });
    await disable.waitFor({ timeout: 10_000 });
    const hook = () => rest('GET', '/events/webhooks').then((r) => (r.json as Array<{ id: string; name: string; enabled: boolean; events: string[] }>).find((w) => w.name === name));
    assert.deepEqual((await hook())?.events, ['sandbox.lifecycle.killed'], 'the API has the webhook with the event checked');
    await disable.click();
    await page.getByRole('button', { name: `Enable webhook ${name}`, exact: true }).waitFor({ timeout: 10_000 });
    assert.equal((await hook())?.enabled, false, 'Disable disabled it');
    await page.getByRole('button', { name: `Delete webhook ${name}`, exact: true }).click();
    await confirm(page, 'Delete webhook');
    await waitFor('the webhook to go', async () => ((await hook()) ? undefined : true), 10_000);

    const keys = region(page, 'API keys');
    await keys.getByLabel('Key name', { exact: true }).fill(name);
    await button(page, 'Create key').click();
    const shown = page.getByLabel('New API key', { exact: true });
    await shown.waitFor({ timeout: 10_000 });
    const newKey = (await shown.innerText()).trim();
    assert.match(newKey, /^e2b_/, 'the new key is shown');
    assert.match(await keys.innerText(), /once/i, 'a note says it is shown once');
    assert.equal((await rest('GET', '/v2/sandboxes', undefined, newKey)).status, 200, 'the new key works');
    const revoke = page.getByRole('button', { name: `Revoke key ${name}`, exact: true });
    await revoke.waitFor({ timeout: 10_000 });
    await revoke.click();
    await confirm(page, 'Revoke key');
    await waitFor('the API to refuse the revoked key', async () => ((await rest('GET', '/v2/sandboxes', undefined, newKey)).status === 401 ? true : undefined), 15_000);
    return errors;
  } finally {
    await page.context().close();
  }
}

/** Admin: the key's own team's quotas saved (and put back after); the node drained (after its confirmation) and undrained. */
export async function adminPage(browser: Browser, consoleUrl: string, rest: Call, key: string): Promise<string[]> {
  const me = (await rest('GET', '/svc/whoami')).json as { teamId: string; teamName: string };
  const before = (await rest('GET', `/svc/teams/${me.teamId}`)).json.limits as Record<string, number>;
  const nodes = (await rest('GET', '/nodes')).json as Array<{ nodeId: string; status: string }>;
  const nodeId = nodes[0]!.nodeId;
  const status = async () => ((await rest('GET', '/nodes')).json as Array<{ nodeId: string; status: string }>).find((n) => n.nodeId === nodeId)?.status;
  const { page, errors } = await openSignedIn(browser, `${consoleUrl}#/admin`, key);
  try {
    const edit = region(page, 'Teams').getByRole('button', { name: `Edit quotas of ${me.teamName}`, exact: true });
    await edit.waitFor({ timeout: 10_000 });
    await edit.click();
    const max = page.getByRole('spinbutton', { name: 'Max sandboxes', exact: true });
    const wanted = before.maxSandboxes === 500 ? 501 : 500;
    await max.fill(String(wanted));
    await button(page, 'Save quotas').click();
    await waitFor('the quota saved', async () => ((await rest('GET', `/svc/teams/${me.teamId}`)).json?.limits?.maxSandboxes === wanted ? true : undefined), 10_000);

    await region(page, 'Nodes').getByRole('button', { name: `Drain node ${nodeId}`, exact: true }).click();
    assert.equal(await status(), 'ready', 'Drain asks first');
    await confirm(page, 'Drain node');
    await waitFor('the node draining', async () => ((await status()) !== 'ready' ? true : undefined), 10_000);
    const undrain = region(page, 'Nodes').getByRole('button', { name: `Undrain node ${nodeId}`, exact: true });
    await undrain.waitFor({ timeout: 15_000 });
    await undrain.click();
    await waitFor('the node ready again', async () => ((await status()) === 'ready' ? true : undefined), 15_000);
    return errors;
  } finally {
    await page.context().close();
    // Whatever a failure left: the quotas as they were, the node taking sandboxes.
    await rest('PATCH', `/svc/teams/${me.teamId}`, { limits: before });
    if ((await status()) !== 'ready') await rest('DELETE', `/nodes/${nodeId}/drain`);
  }
}
