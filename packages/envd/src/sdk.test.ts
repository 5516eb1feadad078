import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CommandExitError, FilesystemEventType, NotFoundError, Sandbox, TimeoutError, type FilesystemEvent } from 'e2b';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { BUILT_SPAWNER, startEnvd, type RunningEnvd } from './testing/envd-process.ts';
import { startFakeApi, type FakeApi } from './testing/fake-e2b-api.ts';
import { ensureTestUser } from './testing/test-user.ts';

// The official e2b SDK, pointed at a local envd through E2B_SANDBOX_URL.
let envd: RunningEnvd;
let api: FakeApi;
let sandbox: Sandbox;
let testUser: ReturnType<typeof ensureTestUser>;
const token = 'sdk-test-token';

before(async () => {
  testUser = ensureTestUser();
  envd = await startEnvd({ TEMPLATE_VAR: 'from-template' }, { accessToken: token });
  api = await startFakeApi(token);
  process.env.E2B_API_URL = api.url;
  process.env.E2B_API_KEY = 'x';
  process.env.E2B_SANDBOX_URL = envd.url;
  sandbox = await Sandbox.connect('sbx-test');
});

after(async () => {
  await envd.stop();
  await api.close();
  testUser.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('commands', () => {
  test('foreground command output and exit code', async () => {
    const result = await sandbox.commands.run('echo hello; echo oops >&2');
    assert.equal(result.exitCode, 0);
    assert.equal(result.stdout, 'hello\n');
    assert.equal(result.stderr, 'oops\n');
  });

  test('a failing command throws CommandExitError with its exit code', async () => {
    await assert.rejects(sandbox.commands.run('echo partial; exit 3'), (err: unknown) => {
      assert.ok(err instanceof CommandExitError);
      assert.equal(err.exitCode, 3);
      assert.equal(err.stdout, 'partial\n');
      assert.equal(err.error, 'exit status 3');
      return true;
    });
  });

  test('runs as the default user in its home, or as root when asked', async () => {
    const who = await sandbox.commands.run('whoami; pwd; echo $HOME; id -u');
    assert.equal(who.stdout, `user\n${testUser.home}\n${testUser.home}\n${testUser.uid}\n`);
    const root = await sandbox.commands.run('whoami; pwd; echo $HOME', { user: 'root' });
    assert.equal(root.stdout, 'root\n/root\n/root\n');
  });

  test('commands start through the spawner when there is one (parent svc-spawner), as the user with its groups', { skip: !existsSync(BUILT_SPAWNER) && 'needs dist/svc-spawner (npm run build)' }, async () => {
    const result = await sandbox.commands.run('cat /proc/$PPID/comm; id -G');
    assert.equal(result.stdout.split('\n')[0], 'svc-spawner');
    const groups = execFileSync('id', ['-G', 'user'], { encoding: 'utf8' });
    assert.equal(result.stdout.split('\n')[1], groups.trim(), 'the user\'s groups from /etc/group');
  });

  test('env vars: the sandbox ones and the request ones', async () => {
    const result = await sandbox.commands.run('echo "$TEMPLATE_VAR $MY_VAR $SVC_ENVD_ACCESS_TOKEN"', { envs: { MY_VAR: 'mine' } });
    assert.equal(result.stdout, 'from-template mine \n');
  });

  test('cwd', async () => {
    assert.equal((await sandbox.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
    await assert.rejects(sandbox.commands.run('pwd', { cwd: '/does/not/exist' }), /does not exist/);
  });

  test('background command with stdin, sendStdin, list, connect and kill', async () => {
    let seen = '';
    const handle = await sandbox.commands.run('cat', { background: true, stdin: true, onStdout: (d) => void (seen += d) });
    await handle.sendStdin('first line\n');
    await until(() => seen.includes('first line'), 'echo of stdin');
    const listed = await sandbox.commands.list();
    assert.ok(listed.some((p) => p.pid === handle.pid && p.cmd === '/bin/bash'));

    let reseen = '';
    const again = await sandbox.commands.connect(handle.pid, { onStdout: (d) => void (reseen += d) });
    await sandbox.commands.sendStdin(handle.pid, 'second line\n');
    await until(() => reseen.includes('second line'), 'output on the second connection');

    assert.equal(await handle.kill(), true);
    assert.equal((await sandbox.commands.list()).some((p) => p.pid === handle.pid), false, 'a killed process is still listed after kill returned');
    await assert.rejects(handle.wait(), (err: unknown) => err instanceof CommandExitError && err.exitCode === -1 && /signal: killed/.test(err.error ?? ''));
    await assert.rejects(again.wait(), CommandExitError);
    assert.equal(await sandbox.commands.kill(handle.pid), false);
  });

  test('closeStdin lets a reader finish', async () => {
    const handle = await sandbox.commands.run('wc -c', { background: true, stdin: true });
    await handle.sendStdin('12345');
    await handle.closeStdin();
    const result = await handle.wait();
    assert.equal(result.stdout.trim(), '5');
  });

  test('timeoutMs ends a long command', async () => {
    await assert.rejects(sandbox.commands.run('sleep 20', { timeoutMs: 700 }), TimeoutError);
  });
});

describe('files', () => {
  const dir = () => `${testUser.home}/sdk-files`;

  test('write and read text, bytes and streams', async () => {
    const info = await sandbox.files.write(`${dir()}/hello.txt`, 'hello world');
    assert.equal(info.path, `${dir()}/hello.txt`);
    assert.equal(await sandbox.files.read(`${dir()}/hello.txt`), 'hello world');
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    await sandbox.files.write(`${dir()}/bytes.bin`, bytes.buffer);
    assert.deepEqual(await sandbox.files.read(`${dir()}/bytes.bin`, { format: 'bytes' }), bytes);
    const stream = await sandbox.files.read(`${dir()}/bytes.bin`, { format: 'stream' });
    const chunks: Uint8Array[] = [];
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk);
    assert.deepEqual(new Uint8Array(Buffer.concat(chunks)), bytes);
    assert.equal(await sandbox.files.read(`${dir()}/hello.txt`, { gzip: true }), 'hello world');
    await sandbox.files.write(`${dir()}/empty.txt`, '');
    assert.equal(await sandbox.files.read(`${dir()}/empty.txt`), '');
  });

  test('relative paths are in the user home, and files belong to the user', async () => {
    await sandbox.files.write('relative.txt', 'rel');
    const info = await sandbox.files.getInfo(`${testUser.home}/relative.txt`);
    assert.equal(info.owner, 'user');
    assert.equal(info.type, 'file');
    assert.equal(info.size, 3);
    assert.equal((await sandbox.commands.run('cat ~/relative.txt')).stdout, 'rel');
    const rootFile = await sandbox.files.write('as-root.txt', 'r', { user: 'root' });
    assert.equal(rootFile.path, '/root/as-root.txt');
  });

  test('several files at once, streamed uploads, gzip and metadata', async () => {
    const written = await sandbox.files.write([
      { path: `${dir()}/multi/a.txt`, data: 'A' },
      { path: `${dir()}/multi/b.txt`, data: 'B' },
    ]);
    assert.deepEqual(written.map((w) => w.name).sort(), ['a.txt', 'b.txt']);
    await sandbox.files.write(`${dir()}/streamed.txt`, new Blob(['streamed']).stream(), { gzip: true });
    assert.equal(await sandbox.files.read(`${dir()}/streamed.txt`), 'streamed');
    const withMeta = await sandbox.files.write(`${dir()}/meta.txt`, 'm', { metadata: { Owner: 'alice', stage: 'draft' } });
    assert.deepEqual(withMeta.metadata, { owner: 'alice', stage: 'draft' });
    await sandbox.files.rename(`${dir()}/meta.txt`, `${dir()}/meta-renamed.txt`);
    assert.deepEqual((await sandbox.files.getInfo(`${dir()}/meta-renamed.txt`)).metadata, { owner: 'alice', stage: 'draft' });
    await sandbox.files.write(`${dir()}/meta-renamed.txt`, 'again');
    assert.equal((await sandbox.files.getInfo(`${dir()}/meta-renamed.txt`)).metadata, undefined);
  });

  test('list with depth, exists, getInfo, makeDir, rename, remove', async () => {
    assert.equal(await sandbox.files.makeDir(`${dir()}/tree/a/b`), true);
    assert.equal(await sandbox.files.makeDir(`${dir()}/tree/a/b`), false);
    await sandbox.files.write(`${dir()}/tree/a/b/deep.txt`, 'deep');
    await sandbox.files.write(`${dir()}/tree/top.txt`, 'top');
    const shallow = await sandbox.files.list(`${dir()}/tree`);
    assert.deepEqual(shallow.map((e) => `${e.name}:${e.type}`), ['a:dir', 'top.txt:file']);
    const deep = await sandbox.files.list(`${dir()}/tree`, { depth: 3 });
    assert.deepEqual(deep.map((e) => e.path.slice(dir().length)), ['/tree/a', '/tree/a/b', '/tree/a/b/deep.txt', '/tree/top.txt']);
    assert.equal(await sandbox.files.exists(`${dir()}/tree/top.txt`), true);
    assert.equal(await sandbox.files.exists(`${dir()}/tree/nope.txt`), false);
    const info = await sandbox.files.getInfo(`${dir()}/tree/a`);
    assert.equal(info.type, 'dir');
    assert.equal(info.permissions, 'drwxr-xr-x');
    assert.ok(info.modifiedTime instanceof Date);
    const moved = await sandbox.files.rename(`${dir()}/tree/top.txt`, `${dir()}/tree/moved/top.txt`);
    assert.equal(moved.path, `${dir()}/tree/moved/top.txt`);
    await sandbox.files.remove(`${dir()}/tree/a`);
    assert.equal(await sandbox.files.exists(`${dir()}/tree/a`), false);
    await assert.rejects(sandbox.files.read(`${dir()}/tree/a/b/deep.txt`), NotFoundError);
  });

  test('signed upload and download URLs', async () => {
    const uploadUrl = await sandbox.uploadUrl(`${dir()}/signed.txt`);
    const form = new FormData();
    form.append('file', new Blob(['signed!']), 'signed.txt');
    const res = await fetch(uploadUrl, { method: 'POST', body: form });
    assert.equal(res.status, 200, await res.clone().text());
    const downloadUrl = await sandbox.downloadUrl(`${dir()}/signed.txt`, { useSignatureExpiration: 60 });
    assert.equal(await (await fetch(downloadUrl)).text(), 'signed!');
    assert.equal((await fetch(downloadUrl.replace(/signature=[^&]+/, 'signature=v1_forged'))).status, 401);
  });

  test('watchDir reports changes', async () => {
    const watched = `${dir()}/watched`;
    await sandbox.files.makeDir(watched);
    const events: FilesystemEvent[] = [];
    const handle = await sandbox.files.watchDir(watched, (e) => void events.push(e), { recursive: true, includeEntry: true });
    await sandbox.files.write(`${watched}/new.txt`, 'x');
    await sandbox.files.makeDir(`${watched}/sub`);
    await sleep(100);
    await sandbox.files.write(`${watched}/sub/inner.txt`, 'y');
    await sandbox.files.rename(`${watched}/new.txt`, `${watched}/renamed.txt`);
    await sandbox.files.remove(`${watched}/renamed.txt`);
    const has = (type: FilesystemEventType, name: string) => events.some((e) => e.type === type && e.name === name);
    await until(
      () =>
        has(FilesystemEventType.WRITE, 'new.txt') &&
        has(FilesystemEventType.CREATE, 'sub') &&
        has(FilesystemEventType.WRITE, 'sub/inner.txt') &&
        has(FilesystemEventType.RENAME, 'new.txt') &&
        has(FilesystemEventType.REMOVE, 'renamed.txt'),
      `watch events, got ${JSON.stringify(events.map((e) => [e.type, e.name]))}`,
    );
    const write = events.find((e) => e.type === FilesystemEventType.WRITE && e.name === 'new.txt')!;
    assert.equal(write.entry?.path, `${watched}/new.txt`);
    await handle.stop();
  });
});

describe('pty', () => {
  test('create, send input, resize, kill', async () => {
    let out = '';
    const decoder = new TextDecoder();
    const term = await sandbox.pty.create({ cols: 80, rows: 24, onData: (d) => void (out += decoder.decode(d)) });
    await sandbox.pty.sendInput(term.pid, new TextEncoder().encode('echo $((6*7)) $TERM; stty size\n'));
    await until(() => out.includes('42 xterm-256color') && out.includes('24 80'), `pty output, got ${JSON.stringify(out)}`);
    await sandbox.pty.resize(term.pid, { cols: 100, rows: 30 });
    await sandbox.pty.sendInput(term.pid, new TextEncoder().encode('stty size; whoami\n'));
    await until(() => out.includes('30 100') && out.includes('user'), `resized pty output, got ${JSON.stringify(out)}`);
    assert.equal(await sandbox.pty.kill(term.pid), true);
    await assert.rejects(term.wait(), CommandExitError);
  });
});
