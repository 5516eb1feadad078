/**
 * How the `git` server runs the `git` binary. The gateway runs as root and the repositories belong
 * to the sandbox's user, who writes their configuration and hooks: a repository's own settings
 * must not make root run a program. Every run sets what would (the command line's `-c` outranks
 * the repository's config) and takes `safe.directory=*`, since which repositories a call may open
 * is this server's own check (git-repo.ts, `paths`), and every command is held to the directories
 * that check passed (`Repo`).
 */
import { execFile } from 'node:child_process';

export interface Run { code: number; stdout: string; stderr: string }

/** A repository as openRepo (git-repo.ts) checked it: where git runs, and the directories it is held to. */
export interface Repo {
  cwd: string;
  gitDir: string;
  workTree: string;
}

/**
 * The settings that would run a program, set off (valid for git 2.39, Debian 12's): hooks
 * (post-checkout, post-commit, ...), the fsmonitor hook `status` runs, an external diff, the pager,
 * ssh, signing and signature checks (gpg.program), automatic maintenance (which runs more git).
 * An empty `diff.external` fails loudly where a diff lacks `--no-ext-diff` (DIFF_FLAGS) instead of
 * running anything.
 */
const SAFE_CONFIG = [
  'safe.directory=*',
  'core.hooksPath=/dev/null',
  'core.fsmonitor=',
  'diff.external=',
  'core.pager=cat',
  'core.sshCommand=',
  'commit.gpgSign=false',
  'log.showSignature=false',
  'gc.auto=0',
  'maintenance.auto=false',
].flatMap((setting) => ['-c', setting]);

/** For every command that makes a diff: no external diff driver, no textconv filter (both programs from the repository's config). */
export const DIFF_FLAGS = ['--no-ext-diff', '--no-textconv'];

/** `git <config> <args>`; `args[0]` is the command, which names a failure to run git at all. */
function exec(cwd: string, config: string[], args: string[], env?: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((done, fail) => {
    execFile('git', [...config, ...args], { cwd, env: env ?? process.env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return fail(new Error(`git ${args[0]}: ${err.message}`));
      done({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

/**
 * Where git finds the repository from `cwd` (following its `.git` file and core.worktree, as any
 * command would): its work tree, git directory and common directory, absolute. Undefined when
 * `cwd` is in no repository's work tree.
 */
export async function discover(cwd: string): Promise<{ workTree: string; gitDir: string; commonDir: string } | undefined> {
  const r = await exec(cwd, SAFE_CONFIG, ['rev-parse', '--path-format=absolute', '--show-toplevel', '--absolute-git-dir', '--git-common-dir']);
  const [workTree, gitDir, commonDir] = r.stdout.split('\n');
  if (r.code !== 0 || !workTree || !gitDir || !commonDir) return undefined;
  return { workTree, gitDir, commonDir };
}

/** The checked directories, named on every command: git finds nothing of its own (git-repo.ts says why). */
const pinned = (repo: Repo) => [`--git-dir=${repo.gitDir}`, `--work-tree=${repo.workTree}`];

/**
 * The repository's clean, smudge and process filters (`filter.<driver>.*`, which .gitattributes
 * applies on add, status and checkout), set off by name: git has no switch for all of them.
 */
async function filterOverrides(repo: Repo): Promise<string[]> {
  const r = await exec(repo.cwd, [...SAFE_CONFIG, ...pinned(repo)], ['config', '--name-only', '--get-regexp', '^filter\\.']);
  // code 1: no filter configured; another failure is the command's own to report
  if (r.code !== 0) return [];
  const drivers = new Set(r.stdout.split('\n').filter(Boolean).map((key) => key.slice('filter.'.length, key.lastIndexOf('.'))).filter(Boolean));
  return [...drivers].flatMap((d) => ['-c', `filter.${d}.clean=`, '-c', `filter.${d}.smudge=`, '-c', `filter.${d}.process=`, '-c', `filter.${d}.required=false`]);
}

/** Runs `git args` in the repository with its programs set off; a non-zero exit is answered, not thrown. */
export async function run(repo: Repo, args: string[], env?: NodeJS.ProcessEnv): Promise<Run> {
  return exec(repo.cwd, [...SAFE_CONFIG, ...await filterOverrides(repo), ...pinned(repo)], args, env);
}

/** git's output without its last newline, as GitPython answers; a failure throws git's own message. */
export async function git(repo: Repo, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  const r = await run(repo, args, env);
  if (r.code !== 0) throw new Error(`git ${args[0]} failed: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout.replace(/\n$/, '');
}
