/** Which moves of the state table drop the proxies' cached route (transitions.ts purges on `purges` or an event). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { STATE_TABLE } from './state-table.ts';

test('the moves into pausing, killing and resuming purge the proxies\' route without an event; every other purge comes with its event', () => {
  const silentPurges = STATE_TABLE.filter((m) => m.purges && !m.event).map((m) => `${m.from} --${m.trigger}--> ${m.to}`);
  // paused --resume--> resuming: a proxy caches a `paused` route for 2 s; unpurged, a request
  // during an API resume got that answer instead of waiting for the resume.
  assert.deepEqual(silentPurges, [
    'running --pause--> pausing',
    'paused --resume--> resuming',
    'running --kill--> killing',
    'paused --kill--> killing',
  ]);
  const quiet = STATE_TABLE.filter((m) => !m.purges && !m.event).map((m) => `${m.from} --${m.trigger}--> ${m.to}`);
  assert.ok(quiet.every((m) => !/--> (pausing|killing|resuming)$/.test(m)), `a move into a transient state that purges nothing: ${quiet.join('; ')}`);
});
