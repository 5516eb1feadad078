import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SvcError, type Logger } from '@svc/common';
import type { CreateSandboxOnNode } from '@svc/contracts/node-agent';
import { CommandError } from '../host/exec.ts';
import { createError, wrap } from './errors.ts';

const STATE = '/var/lib/svc-node';
const TAR_ARGV = ['tar', '--extract', `--file=${STATE}/layers/snap-abc.tar`, '--numeric-owner', '-C', `${STATE}/instances/i-1/disk/upper`];

/** A logger that keeps every line it writes. */
function keptLog(): { logger: Logger; lines: () => string } {
  const out: string[] = [];
  const at = () => (fields: unknown, msg?: string) => { out.push(`${JSON.stringify(fields)} ${msg ?? ''}\n`); };
  const logger = { info: at(), warn: at(), error: at(), debug: at() } as unknown as Logger;
  return { logger, lines: () => out.join('') };
}

const req = { sandboxId: 'sbx-1', timeoutMs: 60_000 } as CreateSandboxOnNode;
const live = new AbortController().signal;

test('a failed restore tells the team what failed and tar\'s own words, never the command line or a host path; the node\'s log keeps them', () => {
  const { logger, lines } = keptLog();
  const err = new CommandError(TAR_ARGV, { code: 2, stdout: '', stderr: `tar: ./${'d'.repeat(40)}/f: Cannot open: File name too long\ntar: Exiting with failure status due to previous errors\n` }, 'restoring the snapshot\'s filesystem');
  const e = createError(req, err, live, logger);
  assert.equal(e.status, 500);
  assert.equal(e.message, `sandbox sbx-1: create failed: restoring the snapshot's filesystem failed: ./${'d'.repeat(40)}/f: Cannot open: File name too long`);
  assert.doesNotMatch(e.message, /var\/lib|--file|--extract/);
  assert.match(lines(), /sbx-1/);
  assert.match(lines(), /--file=\/var\/lib\/svc-node\/layers\/snap-abc\.tar/, 'the whole command line stays in the node\'s log');
});

test('a tar line that names a host path is left out; a command without a label is named by its program alone', () => {
  const { logger } = keptLog();
  const err = new CommandError(['prlimit', '--fsize=10', '--', ...TAR_ARGV], { code: 2, stdout: '', stderr: `tar: ${STATE}/layers/snap-abc.tar: Cannot open: No such file or directory\n` });
  const e = wrap('sandbox sbx-1: resume failed', err, { logger, sandboxId: 'sbx-1' });
  assert.equal(e.message, 'sandbox sbx-1: resume failed: the host command prlimit failed');
});

test('any other error\'s host paths are replaced; an SvcError passes as it is', () => {
  const { logger } = keptLog();
  const e = wrap('sandbox sbx-1: boot from its files failed', new Error(`the sandbox's layer has no ${STATE}/instances/i-1/disk/upper: ENOENT: no such file or directory, lstat '${STATE}/instances/i-1/disk/upper'`), { logger, sandboxId: 'sbx-1' });
  assert.doesNotMatch(e.message, /var\/lib/);
  assert.match(e.message, /the sandbox's layer has no \(a path on the node\): ENOENT/);
  const own = new SvcError(409, 'already paused');
  assert.equal(wrap('x', own, { logger, sandboxId: 'sbx-1' }), own);
});
