/**
 * The svc CLI and the svc SDK against `svc up`, and a template built from an image in a local
 * registry (Debian's docker-registry, pushed with skopeo) that sandboxes then boot from by alias.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox as E2bSandbox, Template } from 'e2b';
import { Sandbox } from '@svc/sdk';
import { OciLayoutWriter, type TestEntry } from '@svc/template-center/test-support/oci-builder';
import { pushLayout, startRegistry, type TestRegistry } from '@svc/template-center/test-support/registry-server';
import { SVC_BIN, startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

let p: RunningPlatform;
diagnoseFailures(() => p);
let registry: TestRegistry;
before(async () => {
  registry = await startRegistry();
  // The same registry stands in for a Docker Hub mirror (template_center.registry_mirrors), and
  // is the registry on this host that builds may pull from (template_center.host_registries).
  p = await startPlatform({ env: { SVC_REGISTRY_MIRRORS: `http://${registry.host}`, SVC_HOST_REGISTRIES: registry.host } });
  useE2bEnv(p);
});
after(async () => {
  await registry?.stop();
  await p?.stop();
});

interface CliResult { code: number; stdout: string; stderr: string }

function svc(...args: string[]): Promise<CliResult> {
  return svcWithInput(undefined, ...args);
}

/** Runs the CLI; `input`, when given, is written to its standard input and then closed. */
function svcWithInput(input: string | undefined, ...args: string[]): Promise<CliResult> {
  return new Promise((res) => {
    const child = execFile(process.execPath, [SVC_BIN, ...args], { env: { ...process.env, SVC_DATA_DIR: p.dataDir }, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => res({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    if (input !== undefined) child.stdin!.end(input);
  });
}

async function svcJson<T>(...args: string[]): Promise<T> {
  const r = await svc(...args, '--json');
  assert.equal(r.code, 0, `svc ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

test('CLI: create, list, info, exec, pause, connect, timeout, kill', async () => {
  const created = await svcJson<{ sandboxId: string }>('sandbox', 'create', '--template', 'base', '--metadata', 'from=cli', '--timeout', '600');
  const id = created.sandboxId;
  const list = await svcJson<Array<{ sandboxId: string; state: string }>>('sandbox', 'list', '--metadata', 'from=cli');
  assert.deepEqual(list.map((s) => s.sandboxId), [id]);
  const human = await svc('sandbox', 'list');
  assert.match(human.stdout, new RegExp(id));
  const exec = await svc('sandbox', 'exec', id, '--', 'sh', '-c', 'echo out; echo err >&2; exit 7');
  assert.equal(exec.code, 7);
  assert.equal(exec.stdout, 'out\n');
  assert.equal(exec.stderr, 'err\n');
  const piped = await svcWithInput('one\ntwo\nthree\n', 'sandbox', 'exec', '-i', id, '--', 'wc', '-l');
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(piped.stdout.trim(), '3', 'exec -i passes standard input until EOF');
  assert.equal((await svc('sandbox', 'pause', id)).code, 0);
  assert.equal((await svcJson<{ state: string }>('sandbox', 'info', id)).state, 'paused');
  assert.equal((await svc('sandbox', 'connect', id, '--timeout', '300')).code, 0);
  assert.equal((await svcJson<{ state: string }>('sandbox', 'info', id)).state, 'running');
  assert.equal((await svc('sandbox', 'timeout', id, '120')).code, 0);
  assert.equal((await svc('sandbox', 'kill', id)).code, 0);
  const gone = await svc('sandbox', 'info', id);
  assert.notEqual(gone.code, 0);
  assert.match(gone.stderr, /^svc: .*killed/m);
  assert.equal(gone.stderr.trim().split('\n').length, 1, 'one clear line');
  const usage = await svc('sandbox', 'create', '--on-timeout', 'sometimes');
  assert.equal(usage.code, 2);
});

test('svc SDK: commands, files, pty and pause/connect', async () => {
  const opts = { apiUrl: p.apiUrl, apiKey: p.apiKey, sandboxUrl: p.sandboxUrl };
  const sbx = await Sandbox.create('base', { ...opts, envs: { WHO: 'sdk' } });
  try {
    const r = await sbx.commands.run('echo "$WHO $(id -un)"');
    assert.equal(r.stdout.trim(), 'sdk user');
    await sbx.files.write('/home/user/x.txt', 'x');
    assert.equal(await sbx.files.read('/home/user/x.txt'), 'x');
    assert.ok((await sbx.files.list('/home/user')).some((e) => e.name === 'x.txt'));
    let out = '';
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d: Uint8Array) => { out += Buffer.from(d).toString(); } });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo $((40+2))\n'));
    for (let i = 0; i < 50 && !out.includes('42'); i++) await new Promise((res) => setTimeout(res, 100));
    assert.ok(out.includes('42'));
    await sbx.pty.kill(term.pid);
    assert.equal(await sbx.pause(), true);
    const again = await Sandbox.connect(sbx.sandboxId, opts);
    assert.equal(await again.files.read('/home/user/x.txt'), 'x');
  } finally {
    await sbx.kill();
  }
});

/** A small image of three layers: busybox, bash with its libraries, and an app layer with a whiteout. */
async function buildImageLayout(dir: string): Promise<void> {
  const file = (name: string, path: string, mode = 0o755): TestEntry => ({ name, content: readFileSync(path), mode });
  // A BusyBox image's tools: its tar lacks GNU tar's options, which a directory COPY must do without.
  const applets = ['sh', 'ls', 'cat', 'echo', 'id', 'ps', 'sleep', 'mkdir', 'rm', 'env', 'whoami', 'uname', 'pwd', 'true', 'tar', 'gzip', 'mv', 'chown', 'chmod', 'grep', 'dirname'];
  const layout = new OciLayoutWriter(dir);
  await layout.tag({
    layers: [
      { entries: [
        { name: 'bin/' }, { name: 'etc/' }, { name: 'tmp/', mode: 0o1777 }, { name: 'lib/' }, { name: 'lib64/' }, { name: 'usr/' }, { name: 'usr/bin/' },
        file('bin/busybox', '/bin/busybox'),
        ...applets.map((a): TestEntry => ({ name: `bin/${a}`, type: 'symlink', linkname: 'busybox' })),
        { name: 'etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\n' },
        { name: 'etc/group', content: 'root:x:0:\n' },
        { name: 'etc/obsolete.conf', content: 'removed by a later layer\n' },
      ] },
      { entries: [
        file('bin/bash', '/bin/bash'),
        file('lib/libtinfo.so.6', '/lib/x86_64-linux-gnu/libtinfo.so.6', 0o644),
        file('lib/libc.so.6', '/lib/x86_64-linux-gnu/libc.so.6', 0o644),
        file('lib64/ld-linux-x86-64.so.2', '/lib64/ld-linux-x86-64.so.2'),
        { name: 'etc/ld.so.conf', content: '/lib\n' },
      ], compression: 'zstd' },
      { entries: [
        { name: 'app/' }, { name: 'app/hello.txt', content: 'hello from a registry image\n' },
        { name: 'etc/.wh.obsolete.conf' },
      ] },
    ],
    config: { Env: ['PATH=/usr/bin:/bin', 'LD_LIBRARY_PATH=/lib', 'APP_MODE=demo'], WorkingDir: '/app', Cmd: ['/bin/sh'] },
  }, 'v1');
  await layout.write();
}

test('svc tpl create --image from a local registry; a sandbox boots from it by alias', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-e2e-image-'));
  try {
    await buildImageLayout(dir);
    const ref = `${registry.host}/e2e/demo:v1`;
    await pushLayout(dir, 'v1', ref);
    await svc('tpl', 'delete', 'e2e-demo'); // left over from an interrupted run, if any
    const built = await svc('tpl', 'create', '--image', ref, '--insecure-registry', '--alias', 'e2e-demo', '--json');
    assert.equal(built.code, 0, built.stderr);
    const info = await svcJson<{ templateId: string; alias: string; status: string; imageInfo: { layers: number } }>('tpl', 'info', 'e2e-demo');
    assert.equal(info.status, 'ready');
    assert.equal(info.imageInfo.layers, 3);
    assert.ok((await svcJson<Array<{ alias?: string }>>('tpl', 'list')).some((t) => t.alias === 'e2e-demo'));

    const sbx = await E2bSandbox.create('e2e-demo');
    try {
      const r = await sbx.commands.run('cat /app/hello.txt; ls /etc; echo "mode=$APP_MODE"', { user: 'root' });
      assert.match(r.stdout, /hello from a registry image/);
      assert.doesNotMatch(r.stdout, /obsolete\.conf/, 'the whiteout removed the file');
      assert.match(r.stdout, /mode=demo/, 'the image environment reaches processes');
    } finally {
      await sbx.kill();
    }

    const missing = await svc('tpl', 'create', '--image', `${registry.host}/e2e/demo:nope`, '--insecure-registry', '--json');
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /nope/);
    assert.equal((await svc('tpl', 'delete', 'e2e-demo')).code, 0);
    assert.notEqual((await svc('tpl', 'info', 'e2e-demo')).code, 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('Template.build fromImage: an image of a loopback registry, and a Docker Hub name served by the configured mirror', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-e2e-image-'));
  const name = `e2e-from-image-${Date.now().toString(36)}`;
  try {
    await buildImageLayout(dir);
    await pushLayout(dir, 'v1', `${registry.host}/e2e/built-on:v1`);
    // docker.io/e2e/mirrored:v1 exists only on the mirror.
    await pushLayout(dir, 'v1', `${registry.host}/e2e/mirrored:v1`);
    const logs: string[] = [];
    await mkdir(join(dir, 'ctx/site'), { recursive: true });
    await writeFile(join(dir, 'ctx/site/index.html'), 'copied with BusyBox tar\n');
    const fromImage = Template({ fileContextPath: join(dir, 'ctx') }).fromImage(`${registry.host}/e2e/built-on:v1`)
      .runCmd('echo "built on $APP_MODE" > /app/built.txt', { user: 'root' })
      .copy('site', '/app/site/', { user: 'root' });
    await Template.build(fromImage, name, { onBuildLogs: (e) => logs.push(e.message) });
    assert.ok(logs.some((l) => /Base image .*built-on:v1 is template tpl-/.test(l)), logs.join('\n'));
    const sbx = await E2bSandbox.create(name);
    try {
      assert.match((await sbx.commands.run('cat /app/built.txt /app/hello.txt /app/site/index.html', { user: 'root' })).stdout, /built on demo\nhello from a registry image\ncopied with BusyBox tar/);
    } finally {
      await sbx.kill();
    }
    await Template.build(Template().fromImage('e2e/mirrored:v1').runCmd('echo mirrored > /app/m.txt', { user: 'root' }), `${name}-m`);
    const m = await E2bSandbox.create(`${name}-m`);
    try {
      assert.equal((await m.commands.run('cat /app/m.txt', { user: 'root' })).stdout, 'mirrored\n');
    } finally {
      await m.kill();
    }
    await assert.rejects(Template.build(Template().fromImage(`${registry.host}/e2e/missing:v1`), `${name}-x`), (e: Error) => /could not be made a template.*missing/s.test(e.message));
    // The master's own port named as a registry: not one the operator named, so never asked.
    const master = p.env.SVC_MASTER_LISTEN!;
    await assert.rejects(Template.build(Template().fromImage(`${master}/v1/sandboxes:latest`), `${name}-h`), (e: Error) => {
      assert.match(e.message, new RegExp(`registry ${master.replace(/\./g, '\\.')} is on the host the template center runs on \\(127\\.0\\.0\\.1 is loopback\\); builds pull from a registry there only when the operator names it in template_center\\.host_registries`));
      return true;
    });
  } finally {
    for (const n of [name, `${name}-m`, `${name}-x`, `${name}-h`]) await fetch(`${p.apiUrl}/templates/${n}`, { method: 'DELETE', headers: { 'X-API-Key': p.apiKey } });
    await rm(dir, { recursive: true, force: true });
  }
});

test('svc tpl build: a Dockerfile (FROM the SDK\'s default base, COPY, RUN, ENV, WORKDIR, CMD) becomes a template its sandboxes start from', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-e2e-dockerfile-'));
  const name = `e2e-dockerfile-${Date.now().toString(36)}`;
  try {
    await mkdir(join(dir, 'ctx/site'), { recursive: true });
    await writeFile(join(dir, 'ctx/site/index.html'), `<h1>${name}</h1>\n`);
    await writeFile(join(dir, 'ctx/Dockerfile'), [
      'FROM e2bdev/base:latest',
      'ENV GREETING="hello from a Dockerfile"',
      'COPY site /srv/site',
      'RUN echo "$GREETING" > /srv/site/greeting.txt',
      'WORKDIR /srv/site',
      'CMD ["sleep", "3600"]',
    ].join('\n'));
    // --cmd and --ready-cmd stand in for the CMD (whose ready check is E2B's 20-second wait; planFromDockerfile's test covers it).
    const built = await svc('tpl', 'build', name, '--path', join(dir, 'ctx'), '--cmd', 'sleep 3600', '--ready-cmd', 'true', '--json');
    assert.equal(built.code, 0, built.stderr + built.stdout);
    assert.equal(JSON.parse(built.stdout).name, name);
    const sbx = await E2bSandbox.create(name);
    try {
      const r = await sbx.commands.run('pwd; cat index.html greeting.txt; ps -eo comm | grep -cx sleep');
      assert.equal(r.stdout, `/srv/site\n<h1>${name}</h1>\nhello from a Dockerfile\n1\n`, 'the last WORKDIR, the copied files, the RUN output, the CMD running');
    } finally {
      await sbx.kill();
    }
    const bad = await svc('tpl', 'build', `${name}-bad`, '--path', dir);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /no Dockerfile/);
  } finally {
    for (const n of [name]) await fetch(`${p.apiUrl}/templates/${n}`, { method: 'DELETE', headers: { 'X-API-Key': p.apiKey } });
    await rm(dir, { recursive: true, force: true });
  }
});
