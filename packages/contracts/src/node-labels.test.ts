import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkLabels, matchesSelector, parseLabelList } from './node-labels.ts';

test('label lists: name=value pairs checked by the label rules; selectors match every pair', () => {
  assert.deepEqual(parseLabelList('zone=a, example.com/tier=gold,empty=', 'node_agent.labels'), { zone: 'a', 'example.com/tier': 'gold', empty: '' });
  assert.deepEqual(parseLabelList('', 'node_agent.labels'), {});
  assert.throws(() => parseLabelList('zone', 'node_agent.labels'), /node_agent\.labels: "zone" is not name=value/);
  assert.throws(() => parseLabelList('kubernetes.io/arch=x', 'node_agent.labels'), /reserved/);
  assert.throws(() => parseLabelList('zone=a b', 'node_agent.labels'), /value must be empty or 1-63 characters/);
  assert.throws(() => checkLabels(['zone'], 'nodeSelector'), /nodeSelector must be an object/);
  assert.throws(() => checkLabels({ zone: 1 }, 'nodeSelector'), /value must be a string/);
  assert.equal(matchesSelector({ zone: 'a', tier: 'gold' }, { zone: 'a' }), true);
  assert.equal(matchesSelector({ zone: 'a' }, { zone: 'a', tier: 'gold' }), false);
  assert.equal(matchesSelector({}, undefined), true);
  assert.equal(matchesSelector({}, {}), true);
});
