import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBuildRequest } from './build-request.ts';

const BASE = { jobId: 'job-1', templateId: 'tpl-1', artifactId: 'art-1', specHash: 'spec-1', source: { kind: 'rootfs-tar', path: '/srv/rootfs.tar' } };

test('queue, the fair-share key: kept when given, absent when not, refused past 128 characters or as another type', () => {
  assert.equal(parseBuildRequest({ ...BASE, queue: 'team-a' }).queue, 'team-a');
  assert.equal(parseBuildRequest({ ...BASE, queue: 'x'.repeat(128) }).queue, 'x'.repeat(128));
  assert.ok(!('queue' in parseBuildRequest(BASE)), 'absent: the one shared queue');
  assert.throws(() => parseBuildRequest({ ...BASE, queue: 'x'.repeat(129) }), /^.*queue must be a string of at most 128 characters/);
  assert.throws(() => parseBuildRequest({ ...BASE, queue: 7 }), /queue must be a string/);
});
