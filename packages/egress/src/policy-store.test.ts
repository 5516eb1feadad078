import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import { PolicyStore } from './policy-store.ts';

const policy = (sandboxId: string, address: string, secret?: string): SandboxEgressPolicy => ({
  sandboxId, address, rules: secret ? [{ name: 'r', match: {}, action: { allow: true, inject: [{ header: 'X-Key', secret }] } }] : [],
});

test('policies by id and by address; a newer policy at an address displaces the older sandbox', () => {
  const s = new PolicyStore();
  assert.equal(s.ready, false);
  s.put(policy('a', '10.0.0.2'));
  assert.equal(s.forAddress('10.0.0.2')?.sandboxId, 'a');
  assert.deepEqual(s.put(policy('b', '10.0.0.2')), { displaced: 'a' });
  assert.equal(s.forAddress('10.0.0.2')?.sandboxId, 'b');
  assert.equal(s.get('a'), undefined);
  // A sandbox that moves leaves its old address.
  s.put(policy('b', '10.0.0.3'));
  assert.equal(s.forAddress('10.0.0.2'), undefined);
  assert.equal(s.forAddress('10.0.0.3')?.sandboxId, 'b');
  assert.equal(s.delete('b'), true);
  assert.equal(s.delete('b'), false);
  assert.equal(s.size, 0);
});

test('live secrets follow the policies', () => {
  const s = new PolicyStore();
  s.put(policy('a', '10.0.0.2', 'one'));
  s.put(policy('b', '10.0.0.3', 'two'));
  assert.deepEqual([...s.liveSecrets()].sort(), ['one', 'two']);
  s.delete('a');
  assert.deepEqual([...s.liveSecrets()], ['two']);
  s.put({ ...policy('c', '10.0.0.4'), transforms: [{ host: 'x.com', inject: [{ header: 'X-T', secret: 'three' }] }] });
  assert.deepEqual([...s.liveSecrets()].sort(), ['three', 'two']);
});

test('replaceAll: the bootstrap list replaces all, except sandboxes changed while it was loading; then ready', () => {
  const s = new PolicyStore();
  s.put(policy('stale', '10.0.0.9'));
  s.beginBootstrap();
  s.put(policy('pushed', '10.0.0.4'));
  s.delete('gone');
  s.replaceAll([policy('a', '10.0.0.2'), policy('pushed', '10.0.0.5'), policy('gone', '10.0.0.6')]);
  assert.equal(s.ready, true);
  assert.deepEqual(s.list().map((p) => p.sandboxId).sort(), ['a', 'pushed']);
  assert.equal(s.get('pushed')?.address, '10.0.0.4');
  // After the bootstrap, a put is an ordinary put again.
  s.replaceAll([]);
  assert.equal(s.size, 0);
});

test('listeners hear of the addresses whose policy changed: a different put, a move, a displacement, a delete, a replace; not the same policy again', () => {
  const store = new PolicyStore();
  const heard: string[][] = [];
  const stop = store.onChange((a) => heard.push(a));
  const p = (sandboxId: string, address: string, host = 'a.test'): SandboxEgressPolicy => ({ sandboxId, address, rules: [{ name: 'r', match: { host }, action: { allow: true } }] });
  store.put(p('s1', '10.0.0.1'));
  store.put(p('s1', '10.0.0.1'));
  store.put(p('s1', '10.0.0.1', 'b.test'));
  store.put(p('s1', '10.0.0.2', 'b.test'));
  store.put(p('s2', '10.0.0.2'));
  store.delete('s2');
  store.delete('s2');
  store.put(p('s3', '10.0.0.3'));
  store.put(p('s4', '10.0.0.4'));
  store.replaceAll([p('s3', '10.0.0.3'), p('s4', '10.0.0.4', 'c.test')]);
  assert.deepEqual(heard, [['10.0.0.1'], ['10.0.0.1'], ['10.0.0.2', '10.0.0.1'], ['10.0.0.2'], ['10.0.0.2'], ['10.0.0.3'], ['10.0.0.4'], ['10.0.0.4']]);
  stop();
  store.delete('s3');
  assert.equal(heard.length, 8, 'unsubscribed');
});
