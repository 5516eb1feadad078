/**
 * envd's spawner with the real helper (dist/svc-spawner, built by `npm run build`) on the host:
 * output, exit statuses, stdin, users and groups, failures, flow control, detaching, and what
 * happens when the helper dies. The same path inside a gVisor sandbox runs in every e2e test.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { BUILT_SPAWNER } from '../testing/envd-process.ts';
import { Spawner, SpawnerUnavailable, type SpawnRequest, type SpawnedChild } from './spawner.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const skip = !existsSync(BUILT_SPAWNER) || process.getuid?.() !== 0 ? 'needs root and dist/svc-spawner (npm run build)' : false;

interface Run { child: SpawnedChild; stdout: () => string; stderr: () => string; ended: Promise<{ code: number | null; signal: number | null }>; stdinErrors: number[] }

async function start(spawner: Spawner, file: string, args: string[], more: Partial<SpawnRequest> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const stdinErrors: number[] = [];
  let end!: (v: { code: number | null; signal: number | null }) => void;
  const ended = new Promise<{ code: number | null; signal: number | null }>((r) => { end = r; });
  const child = await spawner.spawn({ file, args, cwd: '/', env: { PATH: '/usr/bin:/bin' }, withStdin: false, ...more }, {
    output: (kind, data) => { if (kind === 'stdout') stdout += data.toString(); else stderr += data.toString(); },
    stdinError: (errno) => stdinErrors.push(errno),
    exited: (code, signal) => end({ code, signal }),
  });
  return { child, stdout: () => stdout, stderr: () => stderr, ended, stdinErrors };
}

test('the spawner runs processes, relays their output and reports how they ended', { skip }, async () => {
  const spawner = Spawner.start(BUILT_SPAWNER, () => {});
  try {
    const echo = await start(spawner, '/bin/sh', ['-c', 'echo out; echo err >&2; echo "$0 $1 $GREETING"; tr "\\0" " " < /proc/$$/cmdline; exit 3', 'zero', 'one'], { env: { GREETING: 'hi' } });
    assert.deepEqual(await echo.ended, { code: 3, signal: null });
    assert.match(echo.stdout(), /^out\nzero one hi\n\/bin\/sh -c /, 'argv[0] is the file; the arguments and the environment arrive');
    assert.equal(echo.stderr(), 'err\n');

    const killed = await start(spawner, '/bin/sleep', ['30']);
    process.kill(killed.child.pid, 'SIGTERM');
    assert.deepEqual(await killed.ended, { code: null, signal: 15 });

    const cwd = await start(spawner, '/bin/pwd', [], { cwd: '/tmp' });
    await cwd.ended;
    assert.equal(cwd.stdout(), '/tmp\n');

    const own = await start(spawner, '/bin/sh', ['-c', 'ps -o sid= -p $$; ps -o sid= -p $PPID']);
    await own.ended;
    const [sid, parentSid] = own.stdout().trim().split(/\s+/);
    assert.notEqual(sid, parentSid, 'each process gets a session of its own: a kill 0 in it cannot reach envd');

    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => start(spawner, '/bin/echo', [String(i)])));
    await Promise.all(many.map((r) => r.ended));
    assert.deepEqual(many.map((r) => r.stdout()), Array.from({ length: 20 }, (_, i) => `${i}\n`));

    const big = await start(spawner, '/bin/sh', ['-c', 'head -c 5000000 /dev/zero | tr "\\0" a']);
    await big.ended;
    assert.equal(big.stdout().length, 5_000_000, 'large output arrives whole');
  } finally {
    spawner.close();
  }
});

test('the spawner: standard input, users with their groups, and starts that fail', { skip }, async () => {
  const spawner = Spawner.start(BUILT_SPAWNER, () => {});
  try {
    const cat = await start(spawner, '/bin/cat', [], { withStdin: true });
    await cat.child.writeStdin(Buffer.from('line one\n'));
    await cat.child.writeStdin(Buffer.alloc(200_000, 'x'));
    cat.child.closeStdin();
    assert.deepEqual(await cat.ended, { code: 0, signal: null });
    assert.equal(cat.stdout().length, 9 + 200_000, 'stdin larger than a pipe goes through, then EOF');

    const noStdin = await start(spawner, '/bin/cat', []);
    assert.deepEqual(await noStdin.ended, { code: 0, signal: null }, 'without stdin the process reads /dev/null');

    const gone = await start(spawner, '/bin/true', [], { withStdin: true });
    await gone.ended;
    await assert.rejects(gone.child.writeStdin(Buffer.from('too late')), /ended/);

    // A process that reads nothing holds the writer once its pipe is full: the write waits.
    const sleeper = await start(spawner, '/bin/sleep', ['30'], { withStdin: true });
    const blocked = await Promise.race([sleeper.child.writeStdin(Buffer.alloc(1 << 20)).then(() => 'written', () => { /* the outcome is the value compared below */ return 'failed'; }), sleep(500).then(() => 'waiting')]);
    assert.equal(blocked, 'waiting');
    process.kill(sleeper.child.pid, 'SIGKILL');
    await sleeper.ended;

    const nobody = await start(spawner, '/usr/bin/id', [], { user: { uid: 65534, gid: 65534, groups: [65534, 100] } });
    await nobody.ended;
    assert.match(nobody.stdout(), /^uid=65534\(nobody\) gid=65534\(nogroup\) groups=65534\(nogroup\),100\(users\)$/m, 'the user, its group and exactly the groups asked for');
    const noGroups = await start(spawner, '/usr/bin/id', ['-G'], { user: { uid: 65534, gid: 65534, groups: [] } });
    await noGroups.ended;
    assert.equal(noGroups.stdout(), '65534\n', 'no supplementary group is kept from envd');

    await assert.rejects(start(spawner, '/no/such/program', []), /exec: No such file or directory/);
    await assert.rejects(start(spawner, '/bin/true', [], { cwd: '/no/such/dir' }), /chdir: No such file or directory/);
    await assert.rejects(start(spawner, '/etc/passwd', []), /exec: Permission denied/);
    await assert.rejects(start(spawner, '/bin/echo', ['a\0b']), /NUL/);
    const after = await start(spawner, '/bin/echo', ['still serving']);
    await after.ended;
    assert.equal(after.stdout(), 'still serving\n');
  } finally {
    spawner.close();
  }
});

test('the spawner: paused output waits, a detached process ends without its output, a dead helper ends its processes', { skip }, async () => {
  const spawner = Spawner.start(BUILT_SPAWNER, () => {});
  const paused = await start(spawner, '/bin/sh', ['-c', 'sleep 0.2; echo late']);
  paused.child.pause();
  await sleep(600);
  assert.equal(paused.stdout(), '', 'nothing is read while paused');
  paused.child.resume();
  await paused.ended;
  assert.equal(paused.stdout(), 'late\n');

  // A background child keeps stdout open after its parent exits: the end waits for it, unless detached.
  const holder = await start(spawner, '/bin/sh', ['-c', 'sleep 30 & echo $!']);
  const raced = await Promise.race([holder.ended.then(() => 'ended'), sleep(500).then(() => 'waiting')]);
  assert.equal(raced, 'waiting');
  holder.child.detach();
  assert.deepEqual(await holder.ended, { code: 0, signal: null });
  process.kill(Number(holder.stdout().trim()), 'SIGKILL');

  const running = await start(spawner, '/bin/sleep', ['30']);
  process.kill(spawner.pid!, 'SIGKILL');
  assert.deepEqual(await running.ended, { code: null, signal: null }, 'its end is unknown once the helper is gone');
  await sleep(50);
  assert.equal(spawner.available, false);
  await assert.rejects(start(spawner, '/bin/true', []), (err) => err instanceof SpawnerUnavailable);
  process.kill(running.child.pid, 'SIGKILL');
});
