import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collect, counter, gauge, histogram, hotHistogram, renderMetrics, scrapeToken } from './metrics.ts';

/** The sample lines of one metric in the rendered text, `name{labels} value`. */
async function lines(name: string): Promise<string[]> {
  const { body } = await renderMetrics();
  return body.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

test('a metric asked for again by name is the one registered (svc up runs two lifecycle replicas in one process)', () => {
  const c = counter('test_idem_total', 'h', ['outcome']);
  assert.equal(counter('test_idem_total', 'another help', ['outcome']), c);
  const g = gauge('test_idem_gauge', 'h');
  assert.equal(gauge('test_idem_gauge', 'h'), g);
  const h = histogram('test_idem_seconds', 'h', ['pool']);
  assert.equal(histogram('test_idem_seconds', 'h', ['pool']), h);
  assert.equal(hotHistogram('test_idem_hot_seconds', 'h', [0.1]), hotHistogram('test_idem_hot_seconds', 'h', [0.1]));
  // Another kind, or other labels, under a name in use is a bug, not a second metric.
  assert.throws(() => gauge('test_idem_total', 'h', ['outcome']), /registered as a counter with labels \[outcome\], not a gauge/);
  assert.throws(() => counter('test_idem_total', 'h', ['code']), /not a counter with \[code\]/);
  assert.throws(() => hotHistogram('test_idem_seconds', 'h', [0.1]), /not as a hot histogram/);
});

test('counters and histograms render in the text format with their labels', async () => {
  counter('test_render_total', 'Renders.', ['outcome']).inc({ outcome: 'ok' }, 2);
  histogram('test_render_seconds', 'Durations.', ['pool'], [0.1, 1]).observe({ pool: 'warm' }, 0.05);
  const { contentType, body } = await renderMetrics();
  assert.match(contentType, /^text\/plain; version=0\.0\.4/);
  assert.match(body, /# HELP test_render_total Renders\.\n# TYPE test_render_total counter\ntest_render_total\{outcome="ok"\} 2\n/);
  assert.deepEqual(await lines('test_render_seconds_bucket'), [
    'test_render_seconds_bucket{le="0.1",pool="warm"} 1', 'test_render_seconds_bucket{le="1",pool="warm"} 1', 'test_render_seconds_bucket{le="+Inf",pool="warm"} 1',
  ]);
});

test('prom-client\'s process metrics are rendered once', async () => {
  const { body } = await renderMetrics();
  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds']) {
    assert.equal(body.split('\n').filter((l) => l === `# TYPE ${name} ${name.endsWith('_total') ? 'counter' : 'gauge'}`).length, 1, name);
  }
});

test('collect: each scrape clears the metric and adds every hook\'s samples; a removed hook adds nothing', async () => {
  const g = gauge('test_collect_sandboxes', 'h', ['template']);
  const one = collect(g, () => [{ labels: { template: 'base' }, value: 2 }], assert.fail);
  const two = collect(g, async () => [{ labels: { template: 'base' }, value: 3 }, { labels: { template: 'ci' }, value: 1 }], assert.fail);
  assert.deepEqual(await lines('test_collect_sandboxes'), ['test_collect_sandboxes{template="base"} 5', 'test_collect_sandboxes{template="ci"} 1']);
  // Scraped again: the same values, not twice them.
  assert.deepEqual(await lines('test_collect_sandboxes'), ['test_collect_sandboxes{template="base"} 5', 'test_collect_sandboxes{template="ci"} 1']);
  two();
  assert.deepEqual(await lines('test_collect_sandboxes'), ['test_collect_sandboxes{template="base"} 2']);
  one();
  assert.deepEqual(await lines('test_collect_sandboxes'), []);
});

test('collect: two scrapes at once do not interleave a clear with the other\'s additions', async () => {
  const g = gauge('test_collect_concurrent', 'h');
  let calls = 0;
  const off = collect(g, async () => {
    calls++;
    await new Promise((r) => setTimeout(r, 5 * calls));
    return [{ labels: {}, value: 7 }];
  }, assert.fail);
  const [a, b] = await Promise.all([renderMetrics(), renderMetrics()]);
  for (const r of [a, b]) assert.match(r.body, /\ntest_collect_concurrent 7\n/);
  off();
});

test('collect: a hook that fails is reported and adds nothing; the rest of the scrape is answered', async () => {
  const c = counter('test_collect_failing_total', 'h', ['code']);
  const failures: string[] = [];
  const bad = collect(c, async () => { throw new Error('database is down'); }, (err) => failures.push(err.message));
  const good = collect(c, () => [{ labels: { code: '200' }, value: 4 }], assert.fail);
  assert.deepEqual(await lines('test_collect_failing_total'), ['test_collect_failing_total{code="200"} 4']);
  assert.deepEqual(failures, ['database is down']);
  bad();
  good();
});

test('a hot histogram counts into its buckets without labels and renders like any histogram', async () => {
  const h = hotHistogram('test_hot_seconds', 'Hot path durations.', [0.001, 0.01, 0.1]);
  for (const v of [0.0005, 0.001, 0.005, 0.05, 2]) h.observe(v);
  const { body } = await renderMetrics();
  assert.match(body, /# HELP test_hot_seconds Hot path durations\.\n# TYPE test_hot_seconds histogram\n/);
  assert.deepEqual(await lines('test_hot_seconds_bucket'), [
    'test_hot_seconds_bucket{le="0.001"} 2', 'test_hot_seconds_bucket{le="0.01"} 3', 'test_hot_seconds_bucket{le="0.1"} 4', 'test_hot_seconds_bucket{le="+Inf"} 5',
  ]);
  assert.deepEqual(await lines('test_hot_seconds_count'), ['test_hot_seconds_count 5']);
  assert.deepEqual(await lines('test_hot_seconds_sum'), ['test_hot_seconds_sum 2.0565']);
});

test('scrapeToken: the port\'s own header first, else a bearer token; nothing else counts', () => {
  const H = 'X-Svc-Admin-Token';
  assert.equal(scrapeToken({ 'x-svc-admin-token': 'own', authorization: 'Bearer other' }, H), 'own');
  assert.equal(scrapeToken({ authorization: 'Bearer  tok ' }, H), 'tok');
  assert.equal(scrapeToken({ authorization: 'bearer tok' }, H), 'tok');
  assert.equal(scrapeToken({ authorization: 'Basic dTpw' }, H), undefined);
  assert.equal(scrapeToken({ authorization: 'Bearer ' }, H), undefined);
  assert.equal(scrapeToken({ 'x-svc-admin-token': '' }, H), undefined);
  assert.equal(scrapeToken({}, H), undefined);
});
