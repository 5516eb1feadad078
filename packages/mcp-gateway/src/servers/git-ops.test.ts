/**
 * The git server runs as root on repositories their user configures: none of the programs a
 * repository's config names (hooks, fsmonitor, filters, diff drivers, gpg) may run, and the
 * operations still answer as before.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as ops from './git-ops.ts';
import { openRepo, resolveRoots } from './git-repo.ts';

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
  const r = await openRepo(repo, await resolveRoots([dir]));
  writeFileSync(join(repo, 'f.txt'), 'one\ntwo\n');
  assert.match(await ops.status(r), /modified: {3}f\.txt/);
  assert.match(await ops.diffUnstaged(r, 3), /\+two/);
  assert.equal(await ops.add(r, ['f.txt', '.gitattributes']), 'Files staged successfully');
  assert.match(await ops.diffStaged(r, 3), /\+two/);
  assert.match(await ops.commit(r, 'two'), /^Changes committed successfully with hash [0-9a-f]{40}$/);
  assert.match(await ops.diff(r, 'other', 3), /\+two/);
  assert.match(await ops.show(r, 'HEAD'), /^commit [0-9a-f]{40}\nAuthor: u <u@example\.com>[\s\S]*\+two/);
  assert.equal(await ops.show(r, 'HEAD:f.txt'), 'one\ntwo', 'a file at a revision');
  await assert.rejects(ops.show(r, 'HEAD:missing.txt'), /Ref 'HEAD:missing.txt' did not resolve to an object/);
  assert.match(await ops.log(r, 5), /Message: two/);
  assert.equal(await ops.checkout(r, 'other'), "Switched to branch 'other'");
  assert.equal(readFileSync(join(repo, 'f.txt'), 'utf8'), 'one\n');
  assert.equal(await ops.checkout(r, 'main'), "Switched to branch 'main'");
  assert.equal(existsSync(proof) ? readFileSync(proof, 'utf8') : '', '', 'programs that ran');
});

/** A fresh repository at `path` with one commit; `git` runs there as its user would. */
function newRepo(path: string): (...args: string[]) => string {
  const git = (...args: string[]) => execFileSync('git', ['-c', 'safe.directory=*', ...args], { cwd: path, stdio: 'pipe' }).toString();
  execFileSync('git', ['init', '-q', '-b', 'main', path]);
  git('config', 'user.email', 'u@example.com');
  git('config', 'user.name', 'u');
  writeFileSync(join(path, 'mine.txt'), 'mine\n');
  git('add', 'mine.txt');
  git('commit', '-q', '-m', 'mine');
  return git;
}

test('a repository whose config points its work tree outside the allowed paths is refused: no file there is read', async () => {
  const base = mkdtempSync(join(tmpdir(), 'svc-git-worktree-'));
  try {
    const allowed = join(base, 'allowed');
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(join(elsewhere, 'secret.txt'), 'secret\n');
    const git = newRepo(join(allowed, 'repo'));
    git('config', 'core.worktree', elsewhere);
    const roots = await resolveRoots([allowed]);
    await assert.rejects(openRepo(join(allowed, 'repo'), roots), /^Error: Repository path '.*\/allowed\/repo''s work tree '.*\/elsewhere' is outside the allowed repository/);
    // a subdirectory's .git file naming a git directory outside is refused as well
    mkdirSync(join(base, 'outside-git'));
    newRepo(join(base, 'outside-git', 'r'));
    mkdirSync(join(allowed, 'linked'));
    writeFileSync(join(allowed, 'linked', '.git'), `gitdir: ${join(base, 'outside-git', 'r', '.git')}\n`);
    await assert.rejects(openRepo(join(allowed, 'linked'), roots), /'s git directory '.*\/outside-git\/r\/\.git' is outside the allowed repository/);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test('once opened, git works on the checked work tree only, whatever the repository\'s config says by then; its path is resolved', async () => {
  const base = mkdtempSync(join(tmpdir(), 'svc-git-pinned-'));
  try {
    const allowed = join(base, 'allowed');
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(join(elsewhere, 'secret.txt'), 'secret\n');
    const git = newRepo(join(allowed, 'repo'));
    symlinkSync(join(allowed, 'repo'), join(allowed, 'link'));
    const r = await openRepo(join(allowed, 'link'), await resolveRoots([allowed]));
    assert.deepEqual([r.cwd, r.workTree], [join(allowed, 'repo'), join(allowed, 'repo')]);
    // the config changes between the check and the commands (the user writes it at any time)
    git('config', 'core.worktree', elsewhere);
    assert.equal(await ops.add(r, ['.']), 'No changes were staged: the given paths had nothing new to stage. git_status shows what is modified or untracked.');
    await assert.rejects(ops.commit(r, 'steal'), /No changes staged/);
    assert.doesNotMatch(await ops.show(r, 'HEAD'), /secret/);
    assert.doesNotMatch(await ops.status(r), /secret/);
    writeFileSync(join(allowed, 'repo', 'mine.txt'), 'mine, changed\n');
    assert.equal(await ops.add(r, ['.']), 'Files staged successfully');
    assert.match(await ops.commit(r, 'changed'), /^Changes committed successfully/);
    assert.match(await ops.show(r, 'HEAD'), /\+mine, changed/);
    assert.equal(await ops.checkout(r, 'main'), "Switched to branch 'main'");
    assert.equal(readFileSync(join(elsewhere, 'secret.txt'), 'utf8'), 'secret\n');
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});
