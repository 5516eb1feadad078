/** `svc webhook ...` against the fake API (its events part: @svc/sdk/testing/fake-events), as a child process. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startFakeApi, type FakeApi } from '@svc/sdk/testing/fake-api';
import { bundleSvc, runSvc, type Run } from '../test-support/svc-child.ts';

let api: FakeApi;
let home: string;
let bundle: string;

before(async () => {
  api = await startFakeApi({ apiKey: 'key-wh' });
  home = mkdtempSync(join(tmpdir(), 'svc-webhook-home-'));
  bundle = await bundleSvc(home);
});
after(async () => {
  await api.close();
  rmSync(home, { recursive: true, force: true });
});

const run = (args: string[]) => runSvc(bundle, home, args, { SVC_API_URL: api.url, SVC_API_KEY: 'key-wh' });
const json = (r: Run) => {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};
const webhookRequests = () => api.requests.filter((r) => r.url.startsWith('/events/webhooks')).length;
const CREATE = ['webhook', 'create', '--name', 'ops', '--url', 'https://hooks.example.com/svc', '--secret', 's3cret'];

describe('svc webhook', () => {
  test('create sends E2B\'s body and prints the webhook, never the secret; --disabled', async () => {
    const made = json(await run([...CREATE, '--event', 'created', '--event', 'sandbox.lifecycle.killed,paused', '--json']));
    assert.deepEqual(api.requests.at(-1)!.body, {
      name: 'ops', url: 'https://hooks.example.com/svc', signatureSecret: 's3cret',
      events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.killed', 'sandbox.lifecycle.paused'],
    });
    assert.deepEqual(Object.keys(made).sort(), ['createdAt', 'enabled', 'events', 'id', 'name', 'teamID', 'url']);
    assert.equal(made.enabled, true);

    const human = await run([...CREATE, '--event', 'snapshotted', '--event', 'snapshotted', '--disabled']);
    assert.equal(human.code, 0, human.stderr);
    assert.deepEqual(api.requests.at(-1)!.body, {
      name: 'ops', url: 'https://hooks.example.com/svc', signatureSecret: 's3cret', events: ['sandbox.lifecycle.snapshotted'], enabled: false,
    });
    assert.match(human.stdout, /^id:\s+wh-\d+$/m);
    assert.match(human.stdout, /^enabled:\s+no$/m);
    assert.match(human.stdout, /^events:\s+snapshotted$/m);
    assert.match(human.stdout, /^last delivery:\s+never$/m);
    assert.ok(!human.stdout.includes('s3cret'));
  });

  test('list (table and JSON), get, update, delete', async () => {
    const made = json(await run([...CREATE, '--name', 'to-change', '--event', 'killed', '--json']));
    api.events.webhooks.get(made.id)!.lastDelivery = { at: '2026-01-02T03:04:05.000Z', eventId: 'evt-1', outcome: 'failed', status: 500, error: 'HTTP 500' };

    const table = await run(['webhook', 'ls']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^ID\s+NAME\s+ENABLED\s+EVENTS\s+URL\s+LAST DELIVERY$/m);
    assert.match(table.stdout, new RegExp(`^${made.id}\\s+to-change\\s+yes\\s+killed\\s+https://hooks\\.example\\.com/svc\\s+failed HTTP 500 at 2026-01-02T03:04:05\\.000Z: HTTP 500$`, 'm'));
    const listed = json(await run(['webhook', 'list', '--json']));
    assert.ok(listed.some((w: { id: string }) => w.id === made.id));

    const got = json(await run(['webhook', 'get', made.id, '--json']));
    assert.equal(got.lastDelivery.outcome, 'failed');
    assert.match((await run(['webhook', 'info', made.id])).stdout, /^of event:\s+evt-1$/m);

    const changed = json(await run(['webhook', 'update', made.id, '--disable', '--event', 'paused,resumed', '--url', 'http://10.0.0.5:8080/h', '--json']));
    assert.deepEqual(api.requests.at(-1)!.body, { url: 'http://10.0.0.5:8080/h', events: ['sandbox.lifecycle.paused', 'sandbox.lifecycle.resumed'], enabled: false });
    assert.deepEqual([changed.enabled, changed.url, changed.name], [false, 'http://10.0.0.5:8080/h', 'to-change']);
    json(await run(['webhook', 'update', made.id, '--enable', '--name', 'renamed', '--secret', 'next', '--json']));
    assert.deepEqual(api.requests.at(-1)!.body, { name: 'renamed', signatureSecret: 'next', enabled: true });
    assert.equal(api.events.webhooks.get(made.id)!.signatureSecret, 'next');

    assert.deepEqual(json(await run(['webhook', 'delete', made.id, '--json'])), { webhookId: made.id, deleted: true });
    const again = await run(['webhook', 'rm', made.id]);
    assert.deepEqual([again.code, again.stderr], [1, `svc: webhook ${made.id} not found\n`]);
    const missing = await run(['webhook', 'get', made.id]);
    assert.deepEqual([missing.code, missing.stderr], [1, `svc: webhook ${made.id} not found (HTTP 404)\n`]);
    assert.equal((await run(['webhook', 'update', made.id, '--name', 'x'])).code, 1);
  });

  test('bad input: a clear line and a non-zero exit, before any request', async () => {
    const sent = webhookRequests();
    const cases: [string[], number, RegExp][] = [
      [[...CREATE, '--event', 'exploded'], 2, /^svc: --event: unknown event type "exploded"; one of created, updated, paused, resumed, killed, snapshotted\n$/],
      [CREATE, 2, /^svc: required option '--event <type>' not specified\n$/],
      [['webhook', 'create', '--url', 'https://x.example.com', '--event', 'killed', '--secret', 's'], 2, /required option '--name <name>' not specified/],
      [['webhook', 'create', '--name', 'n', '--event', 'killed', '--secret', 's'], 2, /required option '--url <url>' not specified/],
      [['webhook', 'create', '--name', 'n', '--url', 'https://x.example.com', '--event', 'killed'], 2, /required option '--secret <secret>' not specified/],
      [[...CREATE.slice(0, 4), '--url', 'ftp://x.example.com', '--secret', 's', '--event', 'killed'], 1, /^svc: url must be http or https, not ftp\n$/],
      [[...CREATE, '--event', 'killed', '--name', ''], 1, /^svc: name must be a non-empty string\n$/],
      [['webhook', 'update', 'wh-1'], 2, /^svc: give at least one of --name, --url, --event, --secret, --enable, --disable\n$/],
      [['webhook', 'update', 'wh-1', '--enable', '--disable'], 2, /^svc: --enable and --disable cannot go together\n$/],
      [['webhook', 'update', 'wh-1', '--event', 'nope'], 2, /unknown event type "nope"/],
      [['webhook', 'get'], 2, /missing required argument 'id'/],
      [['webhook', 'delete'], 2, /missing required argument 'id'/],
    ];
    const runs = await Promise.all(cases.map(([args]) => run(args)));
    for (const [i, [args, code, message]] of cases.entries()) {
      assert.equal(runs[i]!.code, code, `${args.join(' ')}: ${runs[i]!.stderr}`);
      assert.match(runs[i]!.stderr, message, args.join(' '));
    }
    assert.equal(webhookRequests(), sent);
  });
});
