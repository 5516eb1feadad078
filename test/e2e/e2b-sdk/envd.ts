/**
 * The official e2b SDK, pointed at `svc up`, drives real sandboxes (gVisor, or microVMs with
 * SVC_RUNTIME=microvm) through envd: commands, files and watch, PTY, and envd's refusal of a
 * missing, wrong or foreign token and of a bad or expired signature. Pause, resume, snapshots
 * and fork are in lifecycle.ts, the template builder in templates.ts.
 * Registered by e2b-sdk.test.ts, on the one `svc up` it starts; e2b-sdk-harness.ts says which
 * SDK release runs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CommandExitError, NotFoundError, Sandbox, platform } from '../e2b-sdk-harness.ts';


test('commands: foreground, env, cwd, users, exit codes, background with stdin, kill', async () => {
  const sbx = await Sandbox.create('base', { envs: { GREETING: 'hi' }, timeoutMs: 300_000 });
  try {
    const r = await sbx.commands.run('echo "$GREETING from $(whoami) in $PWD"');
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.trim(), 'hi from user in /home/user');
    const root = await sbx.commands.run('id -u', { user: 'root' });
    assert.equal(root.stdout.trim(), '0');
    const cwd = await sbx.commands.run('pwd', { cwd: '/tmp' });
    assert.equal(cwd.stdout.trim(), '/tmp');
    await assert.rejects(sbx.commands.run('echo oops >&2; exit 3'), (e: unknown) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stderr.trim(), 'oops');
      return true;
    });
    await assert.rejects(sbx.commands.run('/no/such/binary'), (e: unknown) => e instanceof CommandExitError && e.exitCode === 127);
    // The tools E2B users expect of `base`.
    const have = await sbx.commands.run('git --version && python --version && pip --version && node --version && npm --version && gcc --version | head -1 && python -m venv --without-pip /tmp/venv && /tmp/venv/bin/python -c "print(1)"');
    for (const tool of [/git version/, /Python 3/, /^pip /m, /^v\d+\./m, /^\d+\.\d+\.\d+$/m, /gcc/]) assert.match(have.stdout, tool);
    // updateNetwork through the official SDK reaches the sandbox's firewall (enforcement: node-agent network.test.ts).
    await sbx.updateNetwork({ denyOut: ['10.9.0.0/16'] });
    assert.equal((await sbx.commands.run('echo still answering')).stdout.trim(), 'still answering');
    // coreutils 9 stats with AT_NO_AUTOMOUNT, which this runsc refuses; the preloaded shim drops it.
    const tools = await sbx.commands.run('ls -l /etc/os-release && stat -c %F /etc && cp -a /etc/hosts /tmp/h && find /tmp -name h && du -s /tmp/h');
    assert.match(tools.stdout, /os-release/);
    assert.match(tools.stdout, /^directory$/m);
    assert.match(tools.stdout, /^\/tmp\/h$/m);
    // sudo works for `user` although gVisor forbids set-uid programs: it goes through envd
    // (docs/decisions.md): stdin and stdout are the caller's, the exit status comes back.
    const sudo = await sbx.commands.run('sudo id -u && sudo -u user id -un && echo through | sudo tee /root/proof >/dev/null && sudo cat /root/proof && sudo sh -c "exit 4"; echo "rc=$?"');
    assert.equal(sudo.stdout, '0\nuser\nthrough\nrc=4\n');
    await sbx.commands.run('useradd -M guest', { user: 'root' });
    await assert.rejects(sbx.commands.run('sudo id', { user: 'guest' }), (e: unknown) =>
      e instanceof CommandExitError && e.exitCode === 1 && /guest is not in the sudoers file/.test(e.stderr));

    const out: string[] = [];
    const cat = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => { out.push(d); } });
    await sbx.commands.sendStdin(cat.pid, 'line one\n');
    await sbx.commands.sendStdin(cat.pid, 'line two\n');
    for (let i = 0; i < 50 && out.join('').split('\n').length < 3; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(out.join(''), 'line one\nline two\n');
    const listed = await sbx.commands.list();
    assert.ok(listed.some((x) => x.pid === cat.pid));
    assert.equal(await sbx.commands.kill(cat.pid), true);
    await assert.rejects(cat.wait());

    const sleeper = await sbx.commands.run('sleep 600', { background: true });
    await sleeper.kill();
    assert.equal((await sbx.commands.list()).some((x) => x.pid === sleeper.pid), false);
  } finally {
    await sbx.kill();
  }
});

test('files: write, read, list, rename, remove, exists, makeDir, watch', async () => {
  const sbx = await Sandbox.create('base');
  try {
    await sbx.files.write('/home/user/hello.txt', 'hello world');
    assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello world');
    const bytes = new Uint8Array(256 * 1024).map((_, i) => i % 251);
    await sbx.files.write('/tmp/blob.bin', bytes.buffer);
    const back = await sbx.files.read('/tmp/blob.bin', { format: 'bytes' });
    assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
    await sbx.files.makeDir('/home/user/dir/sub');
    await sbx.files.write('/home/user/dir/sub/a.txt', 'a');
    const entries = await sbx.files.list('/home/user/dir', { depth: 2 });
    assert.deepEqual(entries.map((e) => e.path).sort(), ['/home/user/dir/sub', '/home/user/dir/sub/a.txt']);
    await sbx.files.rename('/home/user/hello.txt', '/home/user/renamed.txt');
    assert.equal(await sbx.files.exists('/home/user/hello.txt'), false);
    assert.equal(await sbx.files.exists('/home/user/renamed.txt'), true);
    await sbx.files.remove('/home/user/renamed.txt');
    assert.equal(await sbx.files.exists('/home/user/renamed.txt'), false);
    await assert.rejects(sbx.files.read('/nope/missing.txt'), (e: unknown) => e instanceof NotFoundError);

    const events: string[] = [];
    const watcher = await sbx.files.watchDir('/home/user/dir', (ev) => { events.push(`${ev.type}:${ev.name}`); }, { recursive: true });
    await sbx.files.write('/home/user/dir/new.txt', 'x');
    await sbx.commands.run('echo more >> /home/user/dir/new.txt');
    for (let i = 0; i < 50 && !events.some((e) => e.includes('new.txt')); i++) await new Promise((r) => setTimeout(r, 100));
    await watcher.stop();
    assert.ok(events.some((e) => e.includes('new.txt')), `watch events: ${events.join(', ')}`);
  } finally {
    await sbx.kill();
  }
});

test('pty: create, input, resize, kill', async () => {
  const sbx = await Sandbox.create('base');
  try {
    let screen = '';
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { screen += Buffer.from(d).toString(); } });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((6*7))\n'));
    for (let i = 0; i < 50 && !screen.includes('pty-42'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(screen.includes('pty-42'), screen);
    await sbx.pty.resize(term.pid, { cols: 120, rows: 40 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'));
    for (let i = 0; i < 50 && !screen.includes('40 120'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(screen.includes('40 120'), screen);
    assert.equal(await sbx.pty.kill(term.pid), true);
  } finally {
    await sbx.kill();
  }
});

test('secure by default: envd routes refuse a missing, wrong or foreign token and a bad or expired signature', async () => {
  const a = await Sandbox.create('base');
  const b = await Sandbox.create('base');
  try {
    const tokenOf = (s: Sandbox) => (s as unknown as { envdAccessToken?: string }).envdAccessToken;
    assert.ok(tokenOf(a) && tokenOf(b), 'the official SDK sends no `secure`; every sandbox still gets a token');
    const call = (sbx: Sandbox, path: string, opts: { token?: string; method?: string; body?: string; type?: string } = {}) => fetch(`${platform().sandboxUrl}${path}`, {
      method: opts.method ?? 'GET',
      headers: {
        'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
        ...(opts.token ? { 'X-Access-Token': opts.token } : {}),
        ...(opts.type ? { 'Content-Type': opts.type } : {}),
      },
      body: opts.body,
      signal: AbortSignal.timeout(10_000),
    });
    const routes: Array<[string, { method?: string; body?: string; type?: string }]> = [
      ['/files?path=/etc/passwd', {}],
      ['/files?path=/tmp/x', { method: 'POST', body: 'pwned', type: 'application/octet-stream' }],
      ['/process.Process/List', { method: 'POST', body: '{}', type: 'application/json' }],
      ['/filesystem.Filesystem/Stat', { method: 'POST', body: '{"path":"/etc/passwd"}', type: 'application/json' }],
      ['/envs', {}],
    ];
    for (const [path, opts] of routes) {
      for (const token of [undefined, 'wrong-token', tokenOf(b)]) {
        const r = await call(a, path, { ...opts, token });
        assert.equal(r.status, 401, `${opts.method ?? 'GET'} ${path} with ${token === undefined ? 'no token' : token === tokenOf(b) ? "another sandbox's token" : 'a wrong token'}`);
        const body = await r.json() as { message: string };
        assert.equal(typeof body.message, 'string');
      }
    }
    assert.equal((await call(a, '/health')).status < 300, true, '/health stays open');
    assert.equal((await call(a, '/files?path=/etc/passwd', { token: tokenOf(a) })).status, 200);
    assert.equal((await a.files.exists('/tmp/x')), false, 'no refused write landed');

    const viaProxy = (signed: string) => { const u = new URL(signed); return `${u.pathname}${u.search}`; };
    await a.files.write('/tmp/signed.txt', 'signed');
    const good = await call(a, viaProxy(await a.downloadUrl('/tmp/signed.txt')));
    assert.equal(await good.text(), 'signed', 'a valid signature is enough');
    const foreign = await call(a, viaProxy(await b.downloadUrl('/tmp/signed.txt')));
    assert.equal(foreign.status, 401, "a URL signed with another sandbox's token");
    const expiring = viaProxy(await a.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: 1 }));
    const expiringUpload = viaProxy(await a.uploadUrl('/tmp/late.txt', { useSignatureExpiration: 1 }));
    await new Promise((r) => setTimeout(r, 2_100));
    assert.equal((await call(a, expiring)).status, 401, 'an expired download signature');
    assert.equal((await call(a, expiringUpload, { method: 'POST', body: 'late', type: 'application/octet-stream' })).status, 401, 'an expired upload signature');
    const tampered = viaProxy(await a.downloadUrl('/tmp/signed.txt')).replace('signed.txt', 'other.txt');
    assert.equal((await call(a, tampered)).status, 401, 'a signature for another path');
  } finally {
    await a.kill();
    await b.kill();
  }
});
