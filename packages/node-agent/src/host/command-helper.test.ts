import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CommandError, run, runInBackground } from './exec.ts';
import { commandHelper } from './command-helper.ts';

describe('host commands through the command helper', () => {
  it('captures output, feeds input and reports the exit code', async () => {
    assert.deepEqual(await run('sh', ['-c', 'echo out; echo err >&2; cat'], { input: 'IN' }), { code: 0, stdout: 'out\nIN', stderr: 'err\n' });
    assert.equal((await run('sh', ['-c', 'exit 3'], { allowFail: true })).code, 3);
    await assert.rejects(run('sh', ['-c', 'echo boom >&2; exit 2']), (e: CommandError) => e instanceof CommandError && /exited 2: boom/.test(e.message));
    assert.equal((await run('sh', ['-c', 'echo "$SVC_TEST_VAR"'], { env: { SVC_TEST_VAR: 'given', PATH: process.env.PATH } })).stdout, 'given\n');
  });

  it('answers a command that cannot start as spawn does (ENOENT), and kills one past its time', async () => {
    await assert.rejects(run('/nonexistent/command', []), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
    const killed = await run('sleep', ['5'], { timeoutMs: 150, allowFail: true });
    assert.equal(killed.code, 128);
    assert.match(killed.stderr, /killed after 150 ms/);
  });

  it('keeps a streamed command\'s last 1 MiB in its reply (its reader saw all of it), and kills a host command whose output passes 64 MiB', async () => {
    let seen = 0;
    // 24 MiB, unbroken: before 2026-11-30 every byte of a build's output piled up in the helper.
    const streamed = await run('sh', ['-c', 'head -c 25165824 /dev/zero | tr "\\0" a; echo; echo the-end'], { onOutput: (_s, t) => { seen += t.length; }, timeoutMs: 60_000 });
    assert.equal(seen, 25_165_824 + 1 + 8);
    assert.ok(streamed.stdout.length <= 2 * 1024 * 1024, `${streamed.stdout.length} characters kept`);
    assert.match(streamed.stdout, /a\nthe-end\n$/);
    const flood = await run('sh', ['-c', 'head -c 100000000 /dev/zero | tr "\\0" a; sleep 30'], { allowFail: true, timeoutMs: 60_000 });
    assert.ok(flood.stdout.length <= 64 * 1024 * 1024);
    assert.match(flood.stderr, /killed: its output passed 67108864 characters/);
  });

  it('appends to a log file instead of capturing', async () => {
    const log = join(tmpdir(), `svc-helper-${process.pid}.log`);
    try {
      await run('sh', ['-c', 'echo one; echo two >&2'], { logPath: log });
      assert.deepEqual(readFileSync(log, 'utf8').split('\n').sort(), ['', 'one', 'two']);
    } finally {
      rmSync(log, { force: true });
    }
  });

  it('leaves a background command running, and reports one that ends at once', async () => {
    assert.equal((await runInBackground('sh', ['-c', 'exit 4'], 500)).code, 4);
    assert.equal((await runInBackground('sleep', ['1'], 50)).code, 0);
    assert.equal((await runInBackground('/nonexistent/command', [], 50)).code, 127);
  });

  it('starts a new helper after the old one died, failing only what was under way', async () => {
    const slow = run('sleep', ['5'], { allowFail: true });
    await new Promise((r) => setTimeout(r, 100));
    const helper = (commandHelper as unknown as { child: { kill(s: string): void } }).child;
    helper.kill('SIGKILL');
    await assert.rejects(slow, /command helper exited/);
    assert.equal((await run('echo', ['again'])).stdout, 'again\n');
  });
});
