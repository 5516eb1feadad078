/**
 * The Python kernel against Debian's python3-ipykernel: what its working directory can make it
 * import, how it ends when the service is killed, the size limit of a message, and how it holds
 * its output back for a client that reads slowly.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import type { ExecutionOutput } from '@svc/contracts/code-interpreter';
import type { ExecutionEnd, Log, OutputSink } from './kernel.ts';
import { PythonKernel } from './python-kernel.ts';
import { findPython, kernelArgs, type PythonCommand } from './python-launch.ts';

const quiet: Log = () => {};
let python: PythonCommand;
let dir: string;

before(async () => {
  python = await findPython();
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-pykernel-test-')));
});

after(() => rmSync(dir, { recursive: true, force: true }));

/** A sink that takes every line; `hold()` makes it say the client is behind until `release()`. */
function sink(): { emit: OutputSink; lines: ExecutionOutput[]; hold: () => void; release: () => void } {
  const lines: ExecutionOutput[] = [];
  let behind = false;
  let wake: () => void = () => {};
  let drained = Promise.resolve();
  const emit = Object.assign((line: ExecutionOutput) => {
    lines.push(line);
    return !behind;
  }, { drained: () => drained });
  return {
    emit,
    lines,
    hold: () => {
      behind = true;
      drained = new Promise<void>((resolve) => { wake = resolve; });
    },
    release: () => {
      behind = false;
      wake();
    },
  };
}

async function run(kernel: PythonKernel, code: string): Promise<{ end: ExecutionEnd; lines: ExecutionOutput[] }> {
  const out = sink();
  const end = await kernel.execute(code, out.emit, new AbortController().signal);
  return { end, lines: out.lines };
}

const stdoutOf = (lines: ExecutionOutput[]) => lines.map((l) => (l.type === 'stdout' ? l.text : '')).join('');

test('the kernel is started with -P, or on a Python before 3.11 with a -c line that drops the cwd first', () => {
  assert.deepEqual(kernelArgs({ path: 'python3', safePath: true }, '/c.json').slice(0, 4), ['-Xfrozen_modules=off', '-P', '-m', 'ipykernel_launcher']);
  const old = kernelArgs({ path: 'python3', safePath: false }, '/c.json');
  assert.equal(old[1], '-c');
  assert.match(old[2], /^import sys; del sys\.path\[0\]; /);
});

test('a launcher planted in the cwd is not run (at start or restart); the user\'s own modules there still import', async () => {
  for (const planted of ['ipykernel_launcher', 'runpy']) {
    writeFileSync(join(dir, `${planted}.py`), `open(${JSON.stringify(join(dir, `RAN-${planted}`))}, "w").write("ran")\n`);
  }
  writeFileSync(join(dir, 'mymod.py'), 'VALUE = "mine"\n');
  for (const safePath of [true, false]) {
    const kernel = new PythonKernel(dir, quiet, { python: async () => ({ ...python, safePath }) });
    try {
      const first = await run(kernel, 'import os, mymod\nprint(os.getcwd(), mymod.VALUE)');
      assert.equal(stdoutOf(first.lines), `${dir} mine\n`, `safePath ${safePath}`);
      await kernel.restart();
      assert.equal(stdoutOf((await run(kernel, 'import os, mymod\nprint(os.getcwd(), mymod.VALUE)')).lines), `${dir} mine\n`);
      for (const planted of ['ipykernel_launcher', 'runpy']) assert.ok(!existsSync(join(dir, `RAN-${planted}`)), `${planted}.py ran (safePath ${safePath})`);
    } finally {
      await kernel.shutdown();
    }
  }
});

test('a kernel whose service is killed (SIGKILL) ends with its process group', async () => {
  // The service stands in as a child Node process that starts a kernel and prints its pid.
  const script = `
    import { PythonKernel } from ${JSON.stringify(new URL('./python-kernel.ts', import.meta.url).pathname)};
    const kernel = new PythonKernel(${JSON.stringify(tmpdir())}, () => {});
    const emit = Object.assign((l) => { if (l.type === 'stdout') process.stdout.write(l.text); return true; }, { drained: async () => {} });
    await kernel.execute('import os, subprocess\\nchild = subprocess.Popen(["sleep", "300"])\\nprint(os.getpid(), child.pid, flush=True)', emit, new AbortController().signal);
    setInterval(() => {}, 1000);
  `;
  const service = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: service.stdout! }).once('line', resolve);
    service.once('exit', (code) => reject(new Error(`the stand-in service ended (${code}) before its kernel answered`)));
  });
  const [pid, started] = line.trim().split(' ').map(Number);
  assert.ok(pid > 0 && started > 0, line);
  assert.ok(running(pid) && running(started));
  service.kill('SIGKILL');
  try {
    const deadline = Date.now() + 10_000;
    while ((running(pid) || running(started)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.ok(!running(pid), 'the kernel outlived its service by 10 s');
    assert.ok(!running(started), 'a program the kernel started outlived it');
  } finally {
    try {
      process.kill(-pid, 'SIGKILL'); // what the test leaves behind when it fails
    } catch { /* already gone, as it should be */ }
  }
});

/** Whether the process exists and is not a zombie waiting for a parent that does not reap it. */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

test('a message past the size limit breaks the kernel\'s connection: the execution ends saying so, the next one gets a new kernel', async () => {
  const kernel = new PythonKernel(dir, quiet, { python: async () => python, maxMessageBytes: 1024 * 1024 });
  try {
    const big = await run(kernel, 'print("x" * 2_000_000)');
    assert.equal(typeof big.end, 'object', JSON.stringify(big.end));
    assert.match((big.end as { died: string }).died, /more than 1048576 bytes/);
    assert.equal(stdoutOf((await run(kernel, 'print(6 * 7)')).lines), '42\n');
  } finally {
    await kernel.shutdown();
  }
});

const PRINT_MANY = 'for i in range(10000):\n    print("x" * 2000, flush=True)';
const PRINTED = 10000 * 2001;

test('while the client is behind the kernel\'s output is not read, and none of it is lost', async () => {
  const kernel = new PythonKernel(dir, quiet, { python: async () => python });
  try {
    await kernel.start();
    const out = sink();
    out.hold();
    const running = kernel.execute(PRINT_MANY, out.emit, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 3_000));
    const whileHeld = out.lines.length;
    out.release();
    assert.equal(await running, 'completed');
    // What one read from the socket had already completed still comes: a few dozen of 10 000.
    assert.ok(whileHeld < 100, `${whileHeld} lines came while the client was behind`);
    assert.equal(stdoutOf(out.lines).length, PRINTED, 'every line came once the client caught up');
  } finally {
    await kernel.shutdown();
  }
});

test('an execution held back whose kernel dropped its idle status (a kernel that keeps zmq\'s 1000-message limit) still ends, and says output may be lost', async () => {
  const kernel = new PythonKernel(dir, quiet, { python: async () => python, idleAfterReplyMs: 500 });
  try {
    // Put the limit back a moment after this execution has ended (its own idle must get through).
    await run(kernel, 'import threading, zmq\nt = get_ipython().kernel.iopub_thread\nthreading.Timer(0.3, lambda: t.schedule(lambda: t.socket.setsockopt(zmq.SNDHWM, 1000))).start()');
    await new Promise((r) => setTimeout(r, 1_000));
    const out = sink();
    out.hold();
    const running = kernel.execute(PRINT_MANY, out.emit, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 6_000));
    out.release();
    assert.equal(await running, 'completed');
    assert.ok(out.lines.some((l) => l.type === 'stderr' && /dropped some output/.test(l.text)), JSON.stringify(out.lines.filter((l) => l.type !== 'stdout')));
  } finally {
    await kernel.shutdown();
  }
});
