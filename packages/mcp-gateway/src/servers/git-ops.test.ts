/**
 * The git server runs as root on repositories their user configures: none of the programs a
 * repository's config names (hooks, fsmonitor, filters, diff drivers, gpg) may run, and the
 * operations still answer as before.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as ops from './git-ops.ts';

let dir: string;
let repo: string;
let proof: string;

/** A program that notes it ran (then behaves as `cat`, so that a filter or textconv still works). */
const tattle = (name: string) => `sh -c 'echo ${name} >> ${proof}; cat "$@"' --`;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-git-'));
  repo = join(dir, 'repo');
  proof = join(dir, 'proof');
  const git = (...args: string[]) => execFileSync('git', ['-c', 'safe.directory=*', ...args], { cwd: repo, stdio: 'pipe' });
  execFileSync('git', ['init', '-q', '-b', 'main', repo]);
  git('config', 'user.email', 'u@example.com');
  git('config', 'user.name', 'u');
  writeFileSync(join(repo, 'f.txt'), 'one\n');
  git('add', 'f.txt');
  git('commit', '-q', '-m', 'one');
  git('branch', 'other');
  // What the repository's user could set, each naming a program
  for (const hook of ['post-checkout', 'post-commit', 'prepare-commit-msg', 'pre-commit', 'commit-msg', 'reference-transaction']) {
    writeFileSync(join(repo, '.git/hooks', hook), `#!/bin/sh\necho hook-${hook} >> ${proof}\n`);
    chmodSync(join(repo, '.git/hooks', hook), 0o755);
  }
  git('config', 'core.fsmonitor', `echo fsmonitor >> ${proof}; false`);
  git('config', 'filter.evil.clean', tattle('clean'));
  git('config', 'filter.evil.smudge', tattle('smudge'));
  git('config', 'diff.evil.textconv', tattle('textconv'));
  git('config', 'diff.evil.command', tattle('diff-driver'));
  git('config', 'diff.external', tattle('external-diff'));
  git('config', 'log.showSignature', 'true');
  git('config', 'commit.gpgSign', 'true');
  git('config', 'gpg.program', tattle('gpg'));
  writeFileSync(join(repo, '.gitattributes'), '* filter=evil diff=evil\n');
});
after(() => rmSync(dir, { recursive: true, force: true }));

test('no program of the repository\'s config runs, and every operation still answers', async () => {
  const r = await ops.openRepo(repo, await ops.resolveRoots([dir]));
  writeFileSync(join(repo, 'f.txt'), 'one\ntwo\n');
  assert.match(await ops.status(r), /modified: {3}f\.txt/);
  assert.match(await ops.diffUnstaged(r, 3), /\+two/);
  assert.equal(await ops.add(r, ['f.txt', '.gitattributes']), 'Files staged successfully');
  assert.match(await ops.diffStaged(r, 3), /\+two/);
  assert.match(await ops.commit(r, 'two'), /^Changes committed successfully with hash [0-9a-f]{40}$/);
  assert.match(await ops.diff(r, 'other', 3), /\+two/);
  assert.match(await ops.show(r, 'HEAD'), /^commit [0-9a-f]{40}\nAuthor: u <u@example\.com>[\s\S]*\+two/);
  assert.match(await ops.log(r, 5), /Message: two/);
  assert.equal(await ops.checkout(r, 'other'), "Switched to branch 'other'");
  assert.equal(readFileSync(join(repo, 'f.txt'), 'utf8'), 'one\n');
  assert.equal(await ops.checkout(r, 'main'), "Switched to branch 'main'");
  assert.equal(existsSync(proof) ? readFileSync(proof, 'utf8') : '', '', 'programs that ran');
});
