import assert from 'node:assert/strict';
import { create } from '@bufbuild/protobuf';
import { test } from 'node:test';
import { ProcessConfigSchema } from '@svc/contracts/envd/process/process_pb';
import type { ExitInfo } from './exit-status.ts';
import { PtyProcess } from './pty-process.ts';

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
