import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { webhookSignature } from '@svc/contracts/events';
import { ApiError, InvalidArgumentError, NotFoundError, verifyWebhookSignature, WEBHOOK_HEADERS, Webhooks, type NewWebhook } from './index.ts';
import { startFakeApi, type FakeApi } from './testing/fake-api.ts';

let api: FakeApi;
let conn: { apiUrl: string; apiKey: string };

before(async () => {
  api = await startFakeApi({ apiKey: 'k-wh' });
  conn = { apiUrl: api.url, apiKey: 'k-wh' };
});
after(() => api.close());

const lastRequest = () => api.requests[api.requests.length - 1]!;
const hook = (over: Partial<NewWebhook> = {}): NewWebhook => ({
  name: 'ops', url: 'https://hooks.example.com/svc', events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.killed'], signatureSecret: 's3cret', ...over,
});

describe('Webhooks', () => {
  test('create sends E2B\'s body and answers the webhook without its secret', async () => {
    const w = await Webhooks.create(hook(), conn);
    assert.deepEqual({ method: lastRequest().method, url: lastRequest().url }, { method: 'POST', url: '/events/webhooks' });
    assert.deepEqual(lastRequest().body, hook(), 'enabled left to the server\'s default');
    assert.equal(lastRequest().headers['x-api-key'], 'k-wh');
    assert.deepEqual({ ...w, id: '', createdAt: '' }, {
      id: '', createdAt: '', teamID: 'team-fake', name: 'ops', url: 'https://hooks.example.com/svc', enabled: true,
      events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.killed'],
    });
    assert.equal(api.events.webhooks.get(w.id)!.signatureSecret, 's3cret');

    const off = await Webhooks.create(hook({ enabled: false, events: ['sandbox.lifecycle.paused', 'sandbox.lifecycle.paused'] }), conn);
    assert.deepEqual(lastRequest().body, { ...hook(), enabled: false, events: ['sandbox.lifecycle.paused'] }, 'a type named twice is sent once');
    assert.equal(off.enabled, false);
  });

  test('list, get, update (only the fields given), delete', async () => {
    const w = await Webhooks.create(hook({ name: 'to-change' }), conn);
    const listed = await Webhooks.list(conn);
    assert.deepEqual(listed.find((x) => x.id === w.id), w);
    assert.ok(listed.every((x) => !('signatureSecret' in x)));
    assert.deepEqual(await Webhooks.get(w.id, conn), w);
    assert.equal(lastRequest().url, `/events/webhooks/${w.id}`);

    const changed = await Webhooks.update(w.id, { enabled: false, events: ['sandbox.lifecycle.snapshotted'], signatureSecret: 'new' }, conn);
    assert.deepEqual({ method: lastRequest().method, body: lastRequest().body }, {
      method: 'PATCH', body: { enabled: false, events: ['sandbox.lifecycle.snapshotted'], signatureSecret: 'new' },
    });
    assert.deepEqual(changed, { ...w, enabled: false, events: ['sandbox.lifecycle.snapshotted'] });
    assert.equal(api.events.webhooks.get(w.id)!.signatureSecret, 'new');

    assert.equal(await Webhooks.delete(w.id, conn), true);
    assert.deepEqual({ method: lastRequest().method, url: lastRequest().url }, { method: 'DELETE', url: `/events/webhooks/${w.id}` });
    assert.equal(await Webhooks.delete(w.id, conn), false, 'gone already');
    await assert.rejects(Webhooks.get(w.id, conn), (e: unknown) => e instanceof NotFoundError && e.status === 404);
    await assert.rejects(Webhooks.update(w.id, { name: 'x' }, conn), NotFoundError);
  });

  test('bad fields are refused before any request', async () => {
    const sent = api.requests.length;
    const badCreates: unknown[] = [
      hook({ name: '' }), hook({ name: 'n'.repeat(257) }), hook({ url: 'not a url' }), hook({ url: 'ftp://x.example.com' }),
      hook({ url: 'https://user:pw@x.example.com' }), hook({ url: `https://x.example.com/${'p'.repeat(2048)}` }),
      hook({ events: [] }), hook({ events: ['sandbox.lifecycle.exploded' as never] }), hook({ events: 'sandbox.lifecycle.created' as never }),
      hook({ signatureSecret: '' }), hook({ signatureSecret: 's'.repeat(1025) }), hook({ enabled: 'yes' as never }),
      { url: 'https://x.example.com', events: ['sandbox.lifecycle.created'], signatureSecret: 's' }, null,
    ];
    for (const body of badCreates) await assert.rejects(Webhooks.create(body as NewWebhook, conn), InvalidArgumentError, JSON.stringify(body));
    await assert.rejects(Webhooks.create({ name: 'x' } as NewWebhook, conn), /a webhook needs url, events, signatureSecret/);
    await assert.rejects(Webhooks.update('wh-1', {}, conn), /give at least one of name, url, enabled, events, signatureSecret/);
    await assert.rejects(Webhooks.update('wh-1', { secret: 'x' } as never, conn), InvalidArgumentError, 'a misspelt field is not a change');
    await assert.rejects(Webhooks.update('wh-1', { events: [] }, conn), InvalidArgumentError);
    await assert.rejects(Webhooks.get('', conn), InvalidArgumentError);
    await assert.rejects(Webhooks.delete('', conn), InvalidArgumentError);
    assert.equal(api.requests.length, sent);
    await Webhooks.create(hook({ name: 'n'.repeat(256), signatureSecret: '😀'.repeat(1024) }), conn);
    assert.equal(api.requests.length, sent + 1, 'the limits are the server\'s: characters, not UTF-16 units');
  });

  test('the server\'s own refusal is an ApiError', async () => {
    for (const [id] of api.events.webhooks) api.events.webhooks.delete(id);
    for (let i = 0; i < 50; i++) await Webhooks.create(hook({ name: `w${i}` }), conn);
    await assert.rejects(Webhooks.create(hook(), conn), (e: unknown) => e instanceof ApiError && !(e instanceof InvalidArgumentError) && e.status === 400 && /at most 50/.test(e.message));
  });
});

describe('verifyWebhookSignature', () => {
  const body = JSON.stringify({ version: 'v1', id: 'evt-1', type: 'sandbox.lifecycle.killed', sandboxId: 'sbx-ü' });
  const signature = webhookSignature('s3cret', body);

  test('true for the signature of the body under the secret, as text or as the bytes received', () => {
    assert.equal(WEBHOOK_HEADERS.signature, 'e2b-signature');
    assert.equal(signature, createHash('sha256').update(`s3cret${body}`).digest('base64url'), 'E2B\'s: SHA-256 of secret then body, base64url');
    assert.equal(verifyWebhookSignature('s3cret', body, signature), true);
    assert.equal(verifyWebhookSignature('s3cret', Buffer.from(body), signature), true);
    assert.equal(verifyWebhookSignature('s3cret', new TextEncoder().encode(body), [signature]), true, 'a header as node gives a repeated one');
    const padded = createHash('sha256').update(`s3cret${body}`).digest('base64');
    assert.equal(verifyWebhookSignature('s3cret', body, padded), true, 'standard base64 with padding');
    assert.equal(verifyWebhookSignature('s3cret', body, ` ${signature} `), true);
  });

  test('false for another secret, another body, a cut or missing header, bytes that are no UTF-8', () => {
    assert.equal(verifyWebhookSignature('other', body, signature), false);
    assert.equal(verifyWebhookSignature('s3cret', `${body} `, signature), false);
    assert.equal(verifyWebhookSignature('s3cret', body.replace('killed', 'paused'), signature), false);
    assert.equal(verifyWebhookSignature('s3cret', body, signature.slice(0, -1)), false);
    assert.equal(verifyWebhookSignature('s3cret', body, `${signature}A`), false);
    for (const header of [undefined, null, '', [], [signature, signature]]) assert.equal(verifyWebhookSignature('s3cret', body, header), false, JSON.stringify(header));
    assert.equal(verifyWebhookSignature('', body, webhookSignature('', body)), false, 'no secret verifies nothing');
    const bytes = Buffer.concat([Buffer.from(body), Buffer.from([0xff])]);
    assert.equal(verifyWebhookSignature('s3cret', bytes, webhookSignature('s3cret', bytes.toString('utf8'))), false);
  });
});
