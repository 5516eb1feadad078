import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTimeout } from './sandbox-actions.tsx';
import { eventSummary } from './sandbox-events.tsx';
import { metadataQuery, parseMetadataFilter } from './sandbox-list-data.ts';
import { MAX_TIMEOUT_SECONDS, type SandboxEvent } from './sandbox-types.ts';

test('the timeout field takes whole seconds from 1 to the API\'s most and refuses the rest with the field\'s name', () => {
  assert.equal(parseTimeout(' 600 '), 600);
  assert.equal(parseTimeout(String(MAX_TIMEOUT_SECONDS)), MAX_TIMEOUT_SECONDS);
  for (const bad of ['', '0', '-5', '1.5', '1e3', 'abc', String(MAX_TIMEOUT_SECONDS + 1), '99999999999']) {
    const r = parseTimeout(bad);
    assert.ok(typeof r === 'object' && /Timeout \(seconds\)/.test(r.error), `${JSON.stringify(bad)} is refused`);
  }
});

test('the metadata filter reads key=value pairs joined by & or commas, refuses a part without a key, and is sent as E2B\'s SDK sends it', () => {
  assert.deepEqual(parseMetadataFilter('app=web & owner=ana, stage=ci'), { pairs: [['app', 'web'], ['owner', 'ana'], ['stage', 'ci']] });
  assert.deepEqual(parseMetadataFilter(''), { pairs: [] });
  for (const bad of ['app', '=web', 'a=1&b']) assert.ok('error' in parseMetadataFilter(bad), `${bad} is refused`);
  assert.equal(metadataQuery([]), undefined);
  // Each part encoded twice: the master decodes the query, then each pair (listing.ts).
  assert.equal(metadataQuery([['a b', 'x=y%']]), 'a%2520b=x%253Dy%2525');
});

test('an event\'s line says what changed: the reason, the new deadline, the execution, the metadata of a create', () => {
  const base = { id: 'e', version: 'v1', sandboxId: 's', sandboxTemplateId: 't', timestamp: '2026-11-28T10:00:00Z' } as unknown as SandboxEvent;
  assert.equal(eventSummary({ ...base, type: 'sandbox.lifecycle.resumed' } as SandboxEvent), '–');
  const killed = eventSummary({ ...base, type: 'sandbox.lifecycle.killed', eventData: { reason: 'timeout', execution: { started_at: '', vcpu_count: 2, memory_mb: 512, execution_time: 61_500 } } } as unknown as SandboxEvent);
  assert.match(killed, /reason: timeout · ran 61\.5 s on 2 vCPU, 512 MiB/);
  const created = eventSummary({ ...base, type: 'sandbox.lifecycle.created', eventData: { sandbox_metadata: { app: 'web' } } } as unknown as SandboxEvent);
  assert.equal(created, 'metadata app=web');
});
