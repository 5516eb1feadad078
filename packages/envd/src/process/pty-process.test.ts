import assert from 'node:assert/strict';
import { create } from '@bufbuild/protobuf';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { ProcessConfigSchema } from '@svc/contracts/envd/process/process_pb';
import { BUILT_SPAWNER } from '../testing/envd-process.ts';
import type { ExitInfo } from './exit-status.ts';
import { PtyProcess } from './pty-process.ts';
import { TtyKeySignals } from './pty-signals.ts';
import { Spawner } from './spawner.ts';

function startShell(script: string): PtyProcess {
  const config = create(ProcessConfigSchema, { cmd: '/bin/sh', args: ['-c', script] });
  return PtyProcess.start({ file: '/bin/sh', args: ['-c', script], cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, displayCommand: script }, config, undefined, 80, 24);
}

/** Collects the screen and the end; the first output takes a hold that `holdMs` later ends. */
function watch(proc: PtyProcess, holdMs: number): Promise<{ screen: string; exit: ExitInfo; ms: number }> {
  const started = performance.now();
  let screen = '';
  let held = false;
  return new Promise((resolve) => {
    proc.subscribe({
      output(_kind, data) {
        screen += data.toString();
        if (held) return;
        held = true;
        const release = proc.holdOutput();
        setTimeout(release, holdMs);
      },
      end(exit) {
        resolve({ screen, exit, ms: performance.now() - started });
      },
    });
  });
}

test('a terminal held by a slow client past its process exit still delivers its last output, then the end', async () => {
  // node-pty gives up on a terminal 200 ms after its process exits; the hold outlasts that.
  const { screen, exit } = await watch(startShell('echo first; sleep 0.1; echo second; exit 3'), 800);
  assert.match(screen, /first/);
  assert.match(screen, /second/);
  assert.equal(exit.exitCode, 3);
});

test('a terminal a background process keeps open ends soon after the hold does, not when that process exits', async () => {
  const { screen, exit, ms } = await watch(startShell('echo first; sleep 30 & sleep 0.1; echo second'), 600);
  assert.match(screen, /second/);
  assert.equal(exit.exitCode, 0);
  assert.ok(ms < 5000, `the end came after ${ms.toFixed(0)} ms`);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, what: string, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** The pids of `parent`'s children named `name`. */
function children(parent: number, name: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // ended while the list was read
    }
    const end = stat.lastIndexOf(')');
    if (stat.slice(stat.indexOf('(') + 1, end) === name && Number(stat.slice(end + 2).split(' ')[1]) === parent) found.push(Number(entry));
  }
  return found;
}

/** An interactive bash in a terminal, as `pty.create` starts one; `keys` runs it through the relay. */
function startBash(keys?: TtyKeySignals) {
  const args = ['--norc', '--noprofile', '-i'];
  const exec = keys ? keys.sessionExec('/bin/bash', args) : { file: '/bin/bash', args };
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', TERM: 'xterm', PS1: 'prompt$ ' };
  const proc = PtyProcess.start({ ...exec, cwd: '/', env, displayCommand: 'bash' }, create(ProcessConfigSchema, { cmd: '/bin/bash', args }), undefined, 80, 24, keys);
  let screen = '';
  let ended = false;
  proc.subscribe({ output: (_kind, data) => void (screen += data.toString()), end: () => void (ended = true) });
  const prompts = () => screen.split('prompt$ ').length - 1;
  return {
    proc,
    screen: () => screen,
    ended: () => ended,
    prompts,
    type: (text: string) => proc.writePty(Buffer.from(text)),
    /** Types `command`, and resolves once it runs as the shell's child named `name`. */
    async run(command: string, name: string): Promise<number> {
      await this.type(`${command}\r`);
      await until(() => children(proc.pid, name).length > 0, `${name} to run`);
      return children(proc.pid, name)[0]!;
    },
    /** Types `line` and resolves with what the shell printed up to its next prompt. */
    async ask(line: string): Promise<string> {
      const before = prompts();
      const from = screen.length;
      await this.type(`${line}\r`);
      await until(() => prompts() > before, `the prompt after ${JSON.stringify(line)}, got ${JSON.stringify(screen.slice(from))}`);
      return screen.slice(from);
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false; // ESRCH: gone
  }
}

/** ^C, ^\ and ^Z in a terminal behave as in any other: the same checks with and without the relay. */
async function checkSignalKeys(keys?: TtyKeySignals): Promise<void> {
  const bash = startBash(keys);
  let relays: number[] = [];
  try {
    await until(() => bash.prompts() === 1, 'the first prompt');
    relays = children(bash.proc.pid, 'svc-pty-signals');
    assert.equal(relays.length, keys ? 1 : 0, 'the relay beside the shell where envd plays the line discipline');

    // The shell leads its own session, with the terminal as its controlling one.
    const who = await bash.ask('tty; ps -o pid=,pgid=,sid=,tty=,comm= -p $$');
    assert.match(who, /\/dev\/pts\/\d+/);
    const [pid, pgid, sid, tty, comm] = who.split('\n').find((l) => l.trim().startsWith(`${bash.proc.pid} `))!.trim().split(/\s+/);
    assert.deepEqual([pid, pgid, sid, comm], [String(bash.proc.pid), String(bash.proc.pid), String(bash.proc.pid), 'bash']);
    assert.match(tty!, /^pts\/\d+$/);

    // ^C: the foreground `sleep 30` ends at once and the prompt is back.
    let sleeper = await bash.run('sleep 30', 'sleep');
    let prompts = bash.prompts();
    const typed = performance.now();
    await bash.type('\x03');
    await until(() => !alive(sleeper) && bash.prompts() > prompts, '^C to end sleep 30 and the prompt to return');
    assert.ok(performance.now() - typed < 2000);
    assert.match(await bash.ask('echo "status $?"'), /status 130/);

    // ^\: SIGQUIT.
    sleeper = await bash.run('sleep 31', 'sleep');
    prompts = bash.prompts();
    await bash.type('\x1c');
    await until(() => !alive(sleeper) && bash.prompts() > prompts, '^\\ to end sleep 31');
    assert.match(await bash.ask('echo "status $?"'), /status 131/);

    // ^Z: the job stops, the shell takes the terminal back and can resume or end it.
    sleeper = await bash.run('sleep 32', 'sleep');
    prompts = bash.prompts();
    await bash.type('\x1a');
    await until(() => bash.prompts() > prompts, '^Z to give the prompt back');
    assert.match(readFileSync(`/proc/${sleeper}/stat`, 'utf8'), /\) T /, 'sleep 32 is stopped');
    assert.match(await bash.ask('jobs'), /Stopped\s+sleep 32/);
    await bash.ask('kill -9 %1');
    await until(() => !alive(sleeper) || /\) Z /.test(readFileSync(`/proc/${sleeper}/stat`, 'utf8')), 'the stopped job to end');

    // With ISIG off (as full-screen programs set it), the key is input like any other byte.
    prompts = bash.prompts();
    const from = bash.screen().length;
    await bash.run('stty -isig -icanon min 1; head -c 1 | od -An -tx1; stty sane', 'head');
    await bash.type('\x03');
    await until(() => bash.prompts() > prompts, 'head -c 1 to read ^C');
    assert.match(bash.screen().slice(from), / 03\r?\n/);
  } finally {
    bash.proc.signal('SIGKILL');
  }
  await until(() => bash.ended(), 'the end of the terminal');
  // The relay ends with the shell (it would otherwise hold the terminal open).
  const gone = (pid: number) => !existsSync(`/proc/${pid}`) || /\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  await until(() => relays.every(gone), 'the relay to end');
}

test('^C, ^\\ and ^Z signal the foreground job of a terminal, as the kernel does it', async () => {
  await checkSignalKeys();
});

const noSpawner = !existsSync(BUILT_SPAWNER) && 'needs dist/svc-spawner (npm run build)';
let spawner: Spawner | undefined;
after(() => spawner?.close());

test('^C, ^\\ and ^Z signal the foreground job of a terminal through envd\'s relay (older gVisor)', { skip: noSpawner }, async () => {
  const logged: string[] = [];
  spawner = Spawner.start(BUILT_SPAWNER, (line) => logged.push(line));
  const keys = new TtyKeySignals(spawner, (line) => logged.push(line));
  // Linux signals by itself; the relay, used here all the same, takes the keys before it sees them.
  assert.equal(await keys.needed(), false, 'the host kernel turns ^C into SIGINT');
  await checkSignalKeys(keys);
  assert.deepEqual(logged, []);
});
