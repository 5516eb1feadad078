/**
 * What a failed attempt tells the team and what it logs (delivery-error.ts), and a webhook whose
 * signature secret the vault cannot open (a vault key dropped too early). Until the fix
 * lastDelivery.error carried the socket's message ("connect ECONNREFUSED 10.0.3.7:8080"), a map of
 * the network behind a name; and a secret that did not open threw in the attempt, whose lease
 * then ran out and was taken again every ~40 s, forever, its attempts never counted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_LIMITS } from '@svc/contracts/events';
import { newVaultKeyFile, Vault } from '../vault/vault.ts';
import { deliveryErrorClass } from './delivery-error.ts';
import { CREATED, recordingLogger, subject, waitFor, withHarness } from './deliverer-harness.ts';

test('lastDelivery.error is a class of failure without address or port; the raw error is logged with the webhook id', async () => {
  const { logger, lines } = recordingLogger();
  await withHarness(async (h) => {
    const port = await h.closedPort();
    const hook = await h.hook(`http://127.0.0.1:${port}/hook`);
    h.deliverer('master-a');
    await h.recorder.record(subject(), CREATED);
    const last = await waitFor('the refused attempt', async () => { const l = await h.last(hook.id); return l?.error && l; });
    assert.equal(last.error, 'connection refused');
    const [row] = await h.deliveries(hook.id);
    assert.ok(!String(row?.last_error).includes(String(port)), `the queue's row names no port either: ${row?.last_error}`);
    const logged = lines.find((l) => l.webhookId === hook.id && typeof l.cause === 'string');
    assert.match(String(logged?.cause), new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`), 'the log keeps the raw error');
  }, { logger });
});

test('deliveryErrorClass: each socket failure as its class', () => {
  const err = (code: string, message = `connect ${code} 10.0.3.7:8080`) => Object.assign(new Error(message), { code });
  assert.equal(deliveryErrorClass(err('ECONNREFUSED'), 10_000), 'connection refused');
  assert.equal(deliveryErrorClass(err('ECONNRESET'), 10_000), 'connection reset');
  assert.equal(deliveryErrorClass(err('ETIMEDOUT'), 10_000), 'timed out');
  assert.equal(deliveryErrorClass(err('SVC_WEBHOOK_TIMEOUT'), 10_000), 'timed out (no answer within 10000 ms)');
  assert.equal(deliveryErrorClass(err('DEPTH_ZERO_SELF_SIGNED_CERT'), 10_000), 'TLS error (DEPTH_ZERO_SELF_SIGNED_CERT)');
  assert.equal(deliveryErrorClass(err('ERR_TLS_CERT_ALTNAME_INVALID'), 10_000), 'TLS error (ERR_TLS_CERT_ALTNAME_INVALID)');
  assert.equal(deliveryErrorClass(err('EHOSTUNREACH'), 10_000), 'host unreachable');
  assert.equal(deliveryErrorClass(err('HPE_INVALID_CONSTANT'), 10_000), 'not an HTTP answer');
  assert.equal(deliveryErrorClass(new Error('socket hang up 10.0.3.7'), 10_000), 'connection failed');
});

test('a signature secret the vault cannot open fails the delivery after its retries (another master may hold the key), counted, with a clear error; nothing is sent', async () => {
  const { logger, lines } = recordingLogger();
  await withHarness(async (h) => {
    const ep = await h.endpoint();
    const hook = await h.hook(ep.url);
    // As if sealed under a vault key dropped from the key file since.
    const foreign = new Vault(newVaultKeyFile('gone')).seal('whsec', `webhook:${hook.id}`);
    await h.db.kysely.updateTable('t_svc_webhook').set({ sealed_secret: foreign }).where('webhook_id', '=', hook.id).execute();
    h.deliverer('master-a');
    await h.recorder.record(subject(), CREATED);
    const last = await waitFor('the failed delivery', async () => { const l = await h.last(hook.id); return l?.outcome === 'failed' && l; }, 5000);
    assert.match(last.error ?? '', /^the signature secret cannot be opened .*set a new signatureSecret$/);
    const [row] = await h.deliveries(hook.id);
    assert.deepEqual([row?.status, row?.attempts], ['failed', EVENT_LIMITS.deliveryRetries + 1], 'each attempt counted, retried as any failure');
    assert.equal(ep.hits.length, 0);
    assert.ok(lines.some((l) => l.webhookId === hook.id && l.level === 50 && /vault key gone/.test(String(l.err))), 'logged as an error with the webhook id and the vault\'s reason');
  }, { logger });
});
