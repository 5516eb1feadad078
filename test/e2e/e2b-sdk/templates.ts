/**
 * The official e2b SDK's template builder against `svc up`: Template.build runs its steps in a
 * sandbox of the base (files, env, WORKDIR, USER, tags, the cache, a start command with its
 * ready check, a failing step), and copy uploads the build's context files through a signed URL
 * with Docker COPY semantics. Registered by e2b-sdk.test.ts, on the one `svc up` it starts;
 * e2b-sdk-harness.ts says which SDK release runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasStatus, platform, Sandbox, Template, waitForFile } from '../e2b-sdk-harness.ts';


/**
 * Templates a failed earlier run in this data dir left (the data dir is kept between runs for
 * its cached base): the base refuses deletion while they stand on it, and the refusal lists them.
 * Those built on others (longer names) go first.
 */
async function removeTemplatesOfEarlierRuns(prefix: string): Promise<void> {
  const headers = { 'X-API-Key': platform().apiKey };
  const listed = await fetch(`${platform().apiUrl}/templates`, { headers }).then((r) => r.json() as Promise<Array<{ templateID: string; aliases?: string[] }>>);
  const stale = listed.filter((t) => (t.aliases ?? []).some((a) => a.startsWith(prefix)));
  for (const t of stale.sort((a, b) => (b.aliases?.[0]?.length ?? 0) - (a.aliases?.[0]?.length ?? 0))) {
    await fetch(`${platform().apiUrl}/templates/${t.templateID}`, { method: 'DELETE', headers });
  }
}

test('template builder: Template.build runs its steps in a sandbox of the base; sandboxes start with the files and env; an unchanged rebuild is cached; a failing step fails the build', async () => {
  await removeTemplatesOfEarlierRuns('e2e-built-');
  const name = `e2e-built-${Date.now().toString(36)}`;
  const withLastStep = (last: string) => Template().fromTemplate('base')
    .setEnvs({ BUILT_BY: 'svc' })
    .runCmd(`echo "$BUILT_BY" > /opt/built.txt # ${name}: a first build, whatever this data dir built before`, { user: 'root' })
    .runCmd('id -un > ~/default-user.txt && echo written-in-the-build > /tmp/from-build.txt')
    .setWorkdir('/srv/app')
    .runCmd('pwd > where.txt')
    .runCmd(last, { user: 'root' });
  const t = withLastStep('id -un > /root/who.txt');
  const logs: string[] = [];
  const first = Date.now();
  const info = await Template.build(t, name, { onBuildLogs: (e) => logs.push(e.message) });
  const firstMs = Date.now() - first;
  assert.equal(info.name, name);
  assert.ok(logs.some((l) => l.includes('[2/6] RUN echo')), logs.join('\n'));
  assert.equal(await Template.exists(name), true);

  const sbx = await Sandbox.create(name);
  try {
    assert.equal(await sbx.files.read('/opt/built.txt'), 'svc\n');
    assert.equal(await sbx.files.read('/tmp/from-build.txt'), 'written-in-the-build\n', 'what a step writes into /tmp is in the template, as on E2B');
    assert.equal(await sbx.files.read('/home/user/default-user.txt'), 'user\n', 'steps run as E2B\'s default user, in its home');
    assert.equal(await sbx.files.read('/srv/app/where.txt'), '/srv/app\n', 'WORKDIR is where the next steps run, made for the user');
    assert.equal((await sbx.commands.run('cat /root/who.txt', { user: 'root' })).stdout, 'root\n', 'a step runs as the user it names');
    assert.equal((await sbx.commands.run('pwd; id -un')).stdout, '/srv/app\nuser\n', 'sandboxes start commands in the last WORKDIR as the last USER');
    assert.equal((await sbx.commands.run('echo $BUILT_BY')).stdout.trim(), 'svc', 'ENV is the sandboxes\' environment too');
  } finally {
    await sbx.kill();
  }

  // Tags: a build asked for with name:tag, assigned more, started by name:tag, listed.
  const tagged = await Template.build(t, `${name}:v1`);
  assert.deepEqual((await Template.assignTags(`${name}:v1`, ['prod'])).tags, ['prod']);
  const fromTag = await Sandbox.create(`${name}:prod`);
  assert.equal(await fromTag.files.read('/opt/built.txt'), 'svc\n');
  await fromTag.kill();
  assert.deepEqual((await Template.getTags(tagged.templateId)).map((x) => x.tag).sort(), ['default', 'prod', 'v1']);
  await Template.removeTags(name, 'prod');
  await assert.rejects(Sandbox.create(`${name}:prod`), (e: Error & { statusCode?: number }) => hasStatus(e, 404));

  const again: string[] = [];
  const second = Date.now();
  await Template.build(t, name, { onBuildLogs: (e) => again.push(e.message) });
  assert.ok(again.some((l) => l.includes('cached')), again.join('\n'));
  assert.ok(Date.now() - second < firstMs, `the cached rebuild (${Date.now() - second} ms) is quicker than the first (${firstMs} ms)`);

  // A changed last step: the steps before it come from the cache; only it runs, on their files.
  const changed = withLastStep('cat /opt/built.txt > /root/who.txt');
  const partial: string[] = [];
  await Template.build(changed, `${name}-changed`, { onBuildLogs: (e) => partial.push(e.message) });
  assert.deepEqual(partial.filter((l) => /^\[\d\/6\]/.test(l)), [
    '[1/6] CACHED ENV BUILT_BY svc', `[2/6] CACHED RUN echo "$BUILT_BY" > /opt/built.txt # ${name}: a first build, whatever this data dir built before root`,
    '[3/6] CACHED RUN id -un > ~/default-user.txt && echo written-in-the-build > /tmp/from-build.txt', '[4/6] CACHED WORKDIR /srv/app', '[5/6] CACHED RUN pwd > where.txt',
    '[6/6] RUN cat /opt/built.txt > /root/who.txt root',
  ], partial.join('\n'));
  const fromChanged = await Sandbox.create(`${name}-changed`);
  try {
    assert.equal((await fromChanged.commands.run('cat /root/who.txt /srv/app/where.txt', { user: 'root' })).stdout, 'svc\n/srv/app\n', 'the last step ran on the cached steps\' files');
  } finally {
    await fromChanged.kill();
  }

  // A start command: it runs when a sandbox of the template starts, which answers once the ready check passes.
  const served = Template().fromTemplate(name)
    .setStartCmd('while true; do date > /tmp/alive; sleep 1; done', waitForFile('/tmp/alive'));
  const serveLogs: string[] = [];
  await Template.build(served, `${name}-start`, { onBuildLogs: (e) => serveLogs.push(e.message) });
  assert.ok(serveLogs.includes('Ready'), serveLogs.join('\n'));
  const up = await Sandbox.create(`${name}-start`);
  try {
    assert.equal(await up.files.exists('/tmp/alive'), true, 'create answers once the ready check passes');
    assert.match((await up.commands.run('ps -eo args')).stdout, /while true/, 'the start command runs on');
  } finally {
    await up.kill();
  }
  await fetch(`${platform().apiUrl}/templates/${name}-start`, { method: 'DELETE', headers: { 'X-API-Key': platform().apiKey } });

  const failing = Template().fromTemplate(name).runCmd('echo about to fail; exit 7');
  await assert.rejects(Template.build(failing, `${name}-bad`), (e: Error) => /exited with code 7: about to fail/.test(e.message));
  await assert.rejects(Sandbox.create(`${name}-bad`), (e: Error & { statusCode?: number }) => hasStatus(e, 400), 'a failed build leaves no template a sandbox can start');
  const unchanged = await Sandbox.create(name);
  await unchanged.kill();

  // The base cannot go while a built template stands on it; the built template can, with its files.
  const api = { 'X-API-Key': platform().apiKey };
  const refused = await fetch(`${platform().apiUrl}/templates/base`, { method: 'DELETE', headers: api });
  assert.equal(refused.status, 409);
  assert.match(((await refused.json()) as { message: string }).message, new RegExp(`template ${name}`));
  for (const n of [name, `${name}-bad`]) assert.equal((await fetch(`${platform().apiUrl}/templates/${n}`, { method: 'DELETE', headers: api })).status, 204, n);
  assert.equal(await Template.exists(name), false);
  assert.equal((await fetch(`${platform().apiUrl}/templates/base`, { method: 'GET', headers: api })).status, 200);
});

test('template builder: copy uploads the context files through a signed URL and places them with Docker COPY semantics, owner and mode; changed files rebuild', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-context-'));
  const name = `e2e-copy-${Date.now().toString(36)}`;
  try {
    mkdirSync(join(dir, 'app/lib'), { recursive: true });
    writeFileSync(join(dir, 'app/index.js'), 'console.log("hi")\n');
    // Files of this run only: the data dir may hold the archives of an earlier run, which would not be uploaded again.
    writeFileSync(join(dir, 'app/run.txt'), name);
    writeFileSync(join(dir, 'app/lib/util.js'), 'exports.x = 1\n');
    writeFileSync(join(dir, 'conf.json'), '{"secret":true}\n');
    symlinkSync('index.js', join(dir, 'app/entry.js'));
    const t = () => Template({ fileContextPath: dir }).fromTemplate('base')
      .copy('app', '/srv/app/')
      .copy('app/*.js', '/opt/js/')
      .copy('conf.json', '/etc/svc-conf.json', { user: 'user', mode: 0o600 })
      .setWorkdir('/home/user')
      .copy('conf.json', 'relative/')
      .runCmd('cat /srv/app/lib/util.js > /opt/copied-before-run.txt', { user: 'root' });
    const logs: string[] = [];
    await Template.build(t(), name, { onBuildLogs: (e) => logs.push(e.message) });
    assert.ok(logs.some((l) => /Uploaded 'app'/.test(l)), logs.join('\n'));
    const sbx = await Sandbox.create(name);
    try {
      assert.equal(await sbx.files.read('/srv/app/index.js'), 'console.log("hi")\n', 'a directory\'s contents land in the destination');
      assert.equal(await sbx.files.read('/srv/app/lib/util.js'), 'exports.x = 1\n');
      assert.equal((await sbx.commands.run('readlink /srv/app/entry.js')).stdout.trim(), 'index.js', 'a symlink stays a symlink');
      assert.equal((await sbx.commands.run('ls /opt/js | sort | tr "\\n" " "')).stdout.trim(), 'entry.js index.js', 'a glob copies what it matched, not the rest');
      assert.equal((await sbx.commands.run('stat -c "%U %a" /etc/svc-conf.json', { user: 'root' })).stdout.trim(), 'user 600', 'owner and mode as asked');
      assert.equal((await sbx.commands.run('stat -c %U /srv/app/index.js')).stdout.trim(), 'user', 'the owner is the step\'s user by default');
      assert.equal(await sbx.files.read('/home/user/relative/conf.json'), '{"secret":true}\n', 'a relative destination is under WORKDIR');
      assert.equal(await sbx.files.read('/opt/copied-before-run.txt'), 'exports.x = 1\n', 'a later RUN sees the files');
      assert.equal((await sbx.commands.run('ls -a /tmp | grep -c svc-copy || true')).stdout.trim(), '0', 'nothing of the unpacking is left');
    } finally {
      await sbx.kill();
    }

    const again: string[] = [];
    await Template.build(t(), name, { onBuildLogs: (e) => again.push(e.message) });
    assert.ok(again.some((l) => /already cached/.test(l)) && again.some((l) => /cached/.test(l)), again.join('\n'));
    writeFileSync(join(dir, 'app/lib/util.js'), 'exports.x = 2\n');
    await Template.build(t(), name);
    const changed = await Sandbox.create(name);
    assert.equal(await changed.files.read('/srv/app/lib/util.js'), 'exports.x = 2\n', 'changed files make a new build');
    await changed.kill();

    // The upload URL is the credential: no key needed, but a wrong, missing or foreign signature is 401.
    const api = { 'X-API-Key': platform().apiKey };
    const hash = randomBytes(32).toString('hex');
    const link = await fetch(`${platform().apiUrl}/templates/${name}/files/${hash}`, { headers: api });
    assert.equal(link.status, 201);
    const { present, url } = await link.json() as { present: boolean; url: string };
    assert.equal(present, false);
    assert.ok(url.startsWith(`${platform().apiUrl}/templates/files/${hash}?`), url);
    const put = (u: string) => fetch(u, { method: 'PUT', body: 'not much' }).then((r) => r.status);
    assert.equal(await put(url.replace(/signature=[0-9a-f]+/, `signature=${'0'.repeat(64)}`)), 401);
    assert.equal(await put(url.split('?')[0]), 401);
    assert.equal(await put(url.replace(hash, randomBytes(32).toString('hex'))), 401, 'a signature is for its own hash');
    assert.equal(await put(url.replace(/expires=\d+/, 'expires=1')), 401);
    assert.equal((await fetch(`${platform().apiUrl}/templates/${name}/files/not-a-hash`, { headers: api })).status, 400);
    assert.equal((await fetch(`${platform().apiUrl}/templates/no-such-template/files/${hash}`, { headers: api })).status, 404);
    assert.equal((await fetch(`${platform().apiUrl}/templates/${name}/files/${hash}`)).status, 401, 'asking for a link needs the key');
    assert.equal(await put(url), 200);
    assert.equal(((await (await fetch(`${platform().apiUrl}/templates/${name}/files/${hash}`, { headers: api })).json()) as { present: boolean }).present, true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await fetch(`${platform().apiUrl}/templates/${name}`, { method: 'DELETE', headers: { 'X-API-Key': platform().apiKey } });
  }
});
