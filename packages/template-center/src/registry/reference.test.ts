import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseChallenge } from './challenge.ts';
import { apiHost, parseReference } from './reference.ts';

test('image references parse the way docker reads them', () => {
  assert.deepEqual(parseReference('ubuntu'), { registry: 'docker.io', repository: 'library/ubuntu', tag: 'latest', digest: undefined });
  assert.deepEqual(parseReference('127.0.0.1:5000/foo/bar:v1'), { registry: '127.0.0.1:5000', repository: 'foo/bar', tag: 'v1', digest: undefined });
  assert.deepEqual(parseReference('localhost/x'), { registry: 'localhost', repository: 'x', tag: 'latest', digest: undefined });
  const d = `sha256:${'a'.repeat(64)}`;
  assert.deepEqual(parseReference(`ghcr.io/o/r@${d}`), { registry: 'ghcr.io', repository: 'o/r', tag: undefined, digest: d });
  assert.deepEqual(parseReference(`user/app:1.2@${d}`), { registry: 'docker.io', repository: 'user/app', tag: '1.2', digest: d });
  assert.equal(apiHost('docker.io'), 'registry-1.docker.io');
  assert.throws(() => parseReference('Upper/Case'), /invalid repository/);
  assert.throws(() => parseReference('foo@sha256:short'), /invalid digest/);
  assert.throws(() => parseReference(''), /invalid image reference/);
});

test('WWW-Authenticate challenges', () => {
  assert.deepEqual(parseChallenge('Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"'), {
    scheme: 'bearer', params: { realm: 'https://auth.example/token', service: 'registry.example', scope: 'repository:a/b:pull,push' },
  });
  assert.deepEqual(parseChallenge('Basic realm="basic-realm"'), { scheme: 'basic', params: { realm: 'basic-realm' } });
  assert.equal(parseChallenge(null), null);
});
