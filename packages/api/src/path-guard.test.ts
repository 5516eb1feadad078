import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { silentLogger } from '@svc/common';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { startApiGateway } from './index.ts';
import { pathRefusal } from './path-guard.ts';

/**
 * The gateway's paths mean at the master what they meant to the gateway (path-guard.ts). Found by
 * reading the gateway as an attacker: `/volumecontent/` paths skip the key check for E2B's volume
 * tokens, and dot segments there reached any route of the master as the operator; a
 * percent-encoded letter slipped a host-file template past the operator-only check.
 */
const ADMIN = 'e2b_00000000000000000000000000000000000000ad';

test('dot segments, raw, encoded or behind a backslash, and encoded unreserved characters are refused; ordinary paths are not', () => {
  for (const bad of ['/volumecontent/../../v1/teams', '/volumecontent/%2e%2e/%2e%2e/v1/teams', '/secrets/.%2E/v1/nodes', '/secrets/%2E./x', '/a/./b',
    '/secrets/..\\v1/nodes', '/secrets/.\t./v1/nodes', '/volumecontent/x%2F..%2F..%2Fv1%2Fteams', '/x%2f.%5C..', '/x/..%5Cy', '/%73vc/template', '/svc/template/%61rtifact/download', '/sandboxes/abc%2Dd', '/x/%7e', '/..', '/.']) {
    assert.ok(pathRefusal(bad), bad);
  }
  for (const ok of ['/', '/sandboxes', '/v2/sandboxes?state=running&metadata=a%3Db', '/volumecontent/vol-1/file?path=..%2F..%2Fetc', '/volumecontent/v/path/a%20b/%E2%9C%93/%2F',
    '/templates/files/abc?team=t&expires=1&signature=s', '/sandboxes/a.b/logs', '/secrets/...', '/x/%252e%252e', '/x?y=../..']) {
    assert.equal(pathRefusal(ok), undefined, ok);
  }
});

/** A request with its path exactly as given: fetch would resolve the dot segments on this side. */
function raw(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method, path, headers: { ...headers, ...(body ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('through the gateway: no key and a team key reach nothing of the master\'s by dot segments or encoded letters', async () => {
  const m = await startMasterOverFakeNode((c) => { c.api.api_key = ADMIN; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  try {
    const made = await fetch(`${gw.url}/svc/teams`, { method: 'POST', headers: { 'x-api-key': ADMIN, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'team-b' }) });
    assert.equal(made.status, 201);
    const b = await made.json() as { teamId: string; apiKey: string };
    const attacks: Array<[string, string, Record<string, string>, string?]> = [
      // No key: a volume token's bearer skips the key check.
      ['GET', '/volumecontent/%2e%2e/%2e%2e/v1/teams', { authorization: 'Bearer x' }],
      ['GET', '/volumecontent/../../v1/sandboxes', { authorization: 'Bearer x' }],
      ['POST', `/volumecontent/%2e%2e/%2e%2e/v1/teams/${b.teamId}/keys`, { authorization: 'Bearer x' }, '{}'],
      // Behind encoded slashes, which the router decodes into the route's wildcard.
      ['GET', '/volumecontent/x%2F..%2F..%2F..%2Fv1%2Fteams', { authorization: 'Bearer x' }],
      ['POST', `/volumecontent/x%2F..%2F..%2F..%2Fv1%2Fteams%2F${b.teamId}%2Fkeys`, { authorization: 'Bearer x' }, '{}'],
      ['GET', '/volumecontent/x%5C..%5C..%5C..%5Cv1%5Cteams', { authorization: 'Bearer x' }],
      // A team key: the master's routes for nodes and its internal ones.
      ['GET', '/secrets/%2e%2e/v1/nodes', { 'x-api-key': b.apiKey }],
      ['GET', '/secrets/..\\v1/nodes', { 'x-api-key': b.apiKey }],
      ['GET', '/events/sandboxes/.%2e/.%2E/internal/v1/nodes', { 'x-api-key': b.apiKey }],
      // A team key: a template from a file on the host, past the operator-only check.
      ['POST', '/%73vc/template', { 'x-api-key': b.apiKey }, JSON.stringify({ rootfs_tar: '/etc/shadow' })],
      ['GET', '/svc/template/%61rtifact/download?artifact_id=a', { 'x-api-key': b.apiKey }],
    ];
    for (const [method, path, headers, body] of attacks) {
      const r = await raw(gw.url, method, path, headers, body);
      assert.equal(r.status, 400, `${method} ${path}: ${r.body.slice(0, 200)}`);
      assert.match(JSON.parse(r.body).message, /^the path (has a "\." or "\.\." segment|percent-encodes a letter)/);
    }
    // What the team may do still works, and the key check still answers first for what it guards.
    assert.equal((await raw(gw.url, 'GET', '/v2/sandboxes', { 'x-api-key': b.apiKey })).status, 200);
    assert.equal((await raw(gw.url, 'GET', '/v2/sandboxes')).status, 401);
  } finally {
    await gw.close();
    await m.close();
  }
});
