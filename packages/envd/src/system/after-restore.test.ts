/**
 * POST /svc/after-restore through a real envd process. The helper here is a shell script that
 * speaks svc-sudo's protocol (packages/node-agent/native/sudo.c) and records what it was asked:
 * the real one sets the clock and reseeds the kernel, which a test must not do to its host. The
 * real one runs in microvm guests (packages/node-agent/src/microvm-sandboxes.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';
import { parseRenewal } from './after-restore.ts';

const TOKEN = 'restore-token';
let dir: string;
let helper: string;

/** One request a line: "MS HEX" answered "ok", a seed of "ee" answered as a refusal; each logged. */
const HELPER = `#!/bin/bash
log="$(dirname "$0")/asked.log"
if [ "$1" = --after-restore ]; then echo "once $2 $3" >> "$log"; exit 0; fi
[ "$1" = --after-restore-service ] || exit 2
echo "$$" > "$(dirname "$0")/helper.pid"
while read -r ms hex; do
  echo "service $ms $hex" >> "$log"
  if [ "$hex" = ee ]; then echo "error: clock_settime: Operation not permitted"; else echo ok; fi
done
`;

async function renew(envd: RunningEnvd, body: unknown, token: string | null = TOKEN): Promise<{ status: number; text: string }> {
  const res = await fetch(`${envd.url}/svc/after-restore`, {
    method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(token ? { 'x-access-token': token } : {}) },
  });
  return { status: res.status, text: await res.text() };
}

const asked = () => readFile(join(dir, 'asked.log'), 'utf8').catch(() => { /* the helper was asked nothing yet */ return ''; });

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'envd-after-restore-'));
  helper = join(dir, 'svc-sudo');
  await writeFile(helper, HELPER, { mode: 0o755 });
});
after(() => rm(dir, { recursive: true, force: true }));

describe('POST /svc/after-restore', () => {
  let envd: RunningEnvd;
  before(async () => { envd = await startEnvd({ SVC_ENVD_AFTER_RESTORE: '1', SVC_ENVD_SUDO: helper }, { accessToken: TOKEN }); });
  after(() => envd.stop());

  test('hands the time and the seed to the helper envd started, and answers 204', async () => {
    const r = await renew(envd, { timeMs: 1795960000123, seed: 'a1b2' });
    assert.equal(r.status, 204, r.text);
    assert.match(await asked(), /^service 1795960000123 a1b2$/m);
    assert.doesNotMatch(await asked(), /^once/m, 'no process was started for it');
  });

  test('needs the access token once the sandbox has one', async () => {
    assert.equal((await renew(envd, { timeMs: 1, seed: 'aa' }, null)).status, 401);
    assert.equal((await renew(envd, { timeMs: 1, seed: 'aa' }, 'wrong')).status, 401);
  });

  test('refuses a bad body with 400 and never passes it on', async () => {
    const before = await asked();
    for (const body of ['not json', [], { seed: 'aa' }, { timeMs: -5, seed: 'aa' }, { timeMs: 1.5, seed: 'aa' }, { timeMs: 1, seed: '' }, { timeMs: 1, seed: 'abc' },
      { timeMs: 1, seed: 'zz' }, { timeMs: 1, seed: 'aa\n1 bb' }, { timeMs: 1, seed: 'ab'.repeat(513) }, { timeMs: '1', seed: 'aa' }]) {
      const r = await renew(envd, body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(JSON.parse(r.text).code, 400);
    }
    assert.equal((await renew(envd, JSON.stringify({ timeMs: 1, seed: 'aa', pad: 'x'.repeat(5000) }))).status, 413);
    assert.equal(await asked(), before);
  });

  test("says the helper's reason with a 500 when the guest refuses", async () => {
    const r = await renew(envd, { timeMs: 7, seed: 'ee' });
    assert.equal(r.status, 500);
    assert.match(JSON.parse(r.text).message, /clock_settime: Operation not permitted/);
  });

  test('answers renewals sent at once each in turn', async () => {
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => renew(envd, { timeMs: 100 + i, seed: i % 2 ? 'ee' : 'aa' })));
    assert.deepEqual(all.map((r) => r.status), [204, 500, 204, 500, 204, 500, 204, 500]);
  });

  test('starts svc-sudo --after-restore for each renewal once its helper is gone', async () => {
    process.kill(Number((await readFile(join(dir, 'helper.pid'), 'utf8')).trim()), 'SIGKILL');
    let r = await renew(envd, { timeMs: 42, seed: 'cd' });
    for (let i = 0; i < 50 && r.status !== 204; i++) r = await renew(envd, { timeMs: 42, seed: 'cd' }); // the exit may be seen a moment later
    assert.equal(r.status, 204, r.text);
    assert.match(await asked(), /^once 42 cd$/m);
    assert.match(envd.output(), /after-restore helper ended/);
  });
});

test('an envd that is not in a microvm guest has no such route', async () => {
  const envd = await startEnvd({ SVC_ENVD_SUDO: helper });
  try {
    assert.equal((await renew(envd, { timeMs: 1, seed: 'aa' }, null)).status, 404);
  } finally {
    await envd.stop();
  }
});

test('parseRenewal takes exactly {timeMs, seed}', () => {
  assert.deepEqual(parseRenewal({ timeMs: 5, seed: 'AB', extra: 1 }), { timeMs: 5, seed: 'AB' });
  assert.throws(() => parseRenewal(null), /JSON object/);
  assert.throws(() => parseRenewal({ timeMs: Number.MAX_SAFE_INTEGER + 2, seed: 'aa' }), /timeMs/);
});
