import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { uploadThenRead } from '@svc/common/upload-then-read';
import { StartResponseSchema } from '@svc/contracts/envd/process/process_pb';
import { envelope, post, readStream } from '../testing/connect-client.ts';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';
import { ENVD_VERSION } from '@svc/contracts/envd-version';

let envd: RunningEnvd;
let dir: string;
let file: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'envd-auth-'));
  file = join(dir, 'secret.txt');
  await writeFile(file, 'classified');
  envd = await startEnvd({ ENVD_DEFAULT_USER: 'root', BASE_VAR: 'base' }, { accessToken: 'first-token' });
});
after(async () => {
  await envd.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A URL signature as the SDK computes it, ready for a query string. */
function sign(path: string, operation: string, username: string, token: string, expiration?: number): string {
  const raw = [path, operation, username, token, ...(expiration === undefined ? [] : [String(expiration)])].join(':');
  return encodeURIComponent(`v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`);
}

async function run(cmd: string, token: string): Promise<{ out: string; error?: string }> {
  const res = await post(`${envd.url}/process.Process/Start`, envelope(0, Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-c', cmd] }, stdin: false }))), {
    'content-type': 'application/connect+json',
    'x-access-token': token,
  });
  if (res.status !== 200) return { out: '', error: `HTTP ${res.status} ${res.body.toString()}` };
  const { messages, end } = readStream(StartResponseSchema, res.body, false);
  const out = messages
    .map((m) => m.event?.event)
    .map((e) => (e?.case === 'data' && e.value.output.case === 'stdout' ? Buffer.from(e.value.output.value).toString() : ''))
    .join('');
  return { out, error: end.error?.message };
}

test('the access token guards every route but /health', async () => {
  assert.equal((await fetch(`${envd.url}/health`)).status, 204);

  const envs = await fetch(`${envd.url}/envs`);
  assert.equal(envs.status, 401);
  assert.deepEqual(await envs.json(), { code: 401, message: 'unauthorized access, please provide a valid access token or method signing if supported' });
  const wrong = await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'nope' } });
  assert.equal(wrong.status, 401);

  const rpc = await post(`${envd.url}/process.Process/List`, '{}', { 'content-type': 'application/json' });
  assert.equal(rpc.status, 401);
  assert.equal(JSON.parse(rpc.body.toString()).code, 'unauthenticated');

  const ok = await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'first-token' } });
  assert.equal(ok.status, 200);
  const vars = (await ok.json()) as Record<string, string>;
  assert.equal(vars.BASE_VAR, 'base');
  assert.equal(vars.E2B_SANDBOX, 'true');
  assert.equal(vars.SVC_ENVD_ACCESS_TOKEN, undefined);
  assert.equal(vars.ENVD_DEFAULT_USER, undefined);

  const metrics = await fetch(`${envd.url}/metrics`, { headers: { 'x-access-token': 'first-token' } });
  const m = (await metrics.json()) as Record<string, number>;
  for (const key of ['ts', 'cpu_count', 'cpu_used_pct', 'mem_total', 'mem_used', 'mem_cache', 'mem_total_mib', 'mem_used_mib', 'disk_used', 'disk_total']) {
    assert.equal(typeof m[key], 'number', key);
  }
  assert.ok(m.mem_total! > m.mem_used! && m.disk_total! > 0 && m.cpu_count! >= 1);
});

test('/files accepts the token or a valid signature', async () => {
  const url = `${envd.url}/files?path=${encodeURIComponent(file)}`;
  assert.equal((await fetch(url)).status, 401);
  assert.equal((await fetch(url, { headers: { 'x-access-token': 'bad' } })).status, 401);
  assert.equal(await (await fetch(url, { headers: { 'x-access-token': 'first-token' } })).text(), 'classified');

  const signed = `${url}&signature=${sign(file, 'read', '', 'first-token')}`;
  assert.equal(await (await fetch(signed)).text(), 'classified');
  const wrongOp = `${url}&signature=${sign(file, 'write', '', 'first-token')}`;
  assert.equal((await fetch(wrongOp)).status, 401);
  const later = Math.floor(Date.now() / 1000) + 60;
  const withExpiry = `${url}&username=root&signature=${sign(file, 'read', 'root', 'first-token', later)}&signature_expiration=${later}`;
  assert.equal((await fetch(withExpiry)).status, 200);
  const past = Math.floor(Date.now() / 1000) - 60;
  const expired = `${url}&signature=${sign(file, 'read', '', 'first-token', past)}&signature_expiration=${past}`;
  const res = await fetch(expired);
  assert.equal(res.status, 401);
  assert.match(((await res.json()) as { message: string }).message, /expired/);

  const target = join(dir, 'signed-upload.txt');
  const upload = await fetch(`${envd.url}/files?path=${encodeURIComponent(target)}&signature=${sign(target, 'write', '', 'first-token')}`, {
    method: 'POST',
    body: 'via signature',
    headers: { 'content-type': 'application/octet-stream' },
  });
  assert.equal(upload.status, 200);
});

test('/init personalises the sandbox: env vars, token, default user and workdir', async () => {
  const denied = await fetch(`${envd.url}/init`, { method: 'POST', body: JSON.stringify({ accessToken: 'stolen' }) });
  assert.equal(denied.status, 401);
  assert.equal((await run('true', 'first-token')).error, undefined, 'a refused /init changes nothing');

  const init = await fetch(`${envd.url}/init`, {
    method: 'POST',
    headers: { 'x-access-token': 'first-token', 'content-type': 'application/json' },
    body: JSON.stringify({ envVars: { INIT_VAR: 'from-init' }, accessToken: 'second-token', defaultUser: 'root', defaultWorkdir: dir, timestamp: new Date().toISOString() }),
  });
  assert.equal(init.status, 204);
  assert.equal(init.headers.get('x-envd-version'), ENVD_VERSION);

  assert.match((await run('true', 'first-token')).error ?? '', /HTTP 401/);
  const { out, error } = await run('echo "$INIT_VAR $BASE_VAR"; pwd; whoami', 'second-token');
  assert.equal(error, undefined);
  assert.equal(out, `from-init base\n${dir}\nroot\n`);

  // An older /init (e.g. a retry that arrives late) changes nothing; one that sets a token says so (init-order.test.ts).
  const stale = await fetch(`${envd.url}/init`, {
    method: 'POST',
    headers: { 'x-access-token': 'second-token' },
    body: JSON.stringify({ envVars: {}, accessToken: 'third-token', timestamp: new Date(Date.now() - 3_600_000).toISOString() }),
  });
  assert.equal(stale.status, 409);
  assert.equal((await run('echo $INIT_VAR', 'second-token')).out, 'from-init\n');

  // Proving knowledge of the current token in the body is enough too.
  const again = await fetch(`${envd.url}/init`, { method: 'POST', body: JSON.stringify({ accessToken: 'second-token', envVars: { INIT_VAR: 'replaced' } }) });
  assert.equal(again.status, 204);
  assert.equal((await run('echo "[$INIT_VAR]"', 'second-token')).out, '[replaced]\n');

  const bad = await fetch(`${envd.url}/init`, { method: 'POST', headers: { 'x-access-token': 'second-token' }, body: '{"envVars": [1]}' });
  assert.equal(bad.status, 400);
});

test('an oversized /init is answered 413 with the JSON body after the whole upload, not reset', async () => {
  const { request } = await import('node:http');
  const url = new URL(`${envd.url}/init`);
  const body = Buffer.from(JSON.stringify({ envVars: { A: '1' }, pad: 'x'.repeat(11 * 1024 * 1024) }));
  // Twice on a kept-alive connection, twice as a client that closes after each request (agent:
  // false sends Connection: close, and the socket must stay open until the upload is read).
  for (let i = 0; i < 4; i++) {
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, path: '/init', method: 'POST', ...(i >= 2 ? { agent: false } : {}),
        headers: { 'content-type': 'application/json', 'content-length': body.length, 'x-access-token': 'first-token' } }, (res) => {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(answer.status, 413, answer.text);
    assert.match(JSON.parse(answer.text).message, /larger than the limit/);
  }
  // A client that sends all of it before reading, on a connection it closes: a reset would discard the answer.
  const raw = await uploadThenRead({ port: Number(url.port), host: url.hostname, method: 'POST', path: '/init', headers: { Host: 'envd', 'X-Access-Token': 'first-token', 'Content-Type': 'application/json' }, body });
  assert.equal(raw, 'HTTP/1.1 413 Payload Too Large');
});
