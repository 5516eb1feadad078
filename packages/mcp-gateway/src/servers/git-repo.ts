/**
 * Which repository a call of the `git` server may open (the config's `paths`), and the directories
 * every later git command is held to. Git runs as root while the sandbox's user writes the
 * repository: where the repository's directory is says little, since its own config and `.git`
 * file decide where git works. `core.worktree=/elsewhere` made `git add .`, `commit`, `show` and
 * `checkout` read and write /elsewhere (any file of the sandbox, read through the index), and a
 * `.git` file or `commondir` may name another repository's objects. So the work tree, git directory
 * and common directory git finds are each checked against the roots, and each command then names
 * the checked ones (`--git-dir`, `--work-tree`: a `-c core.worktree` would not do, since git reads
 * the repository's own core.worktree while finding it, before the command line's config applies).
 */
import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { discover, type Repo } from './git-run.ts';

export const within = (root: string, path: string): boolean => {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
};

/** The allowed roots, resolved once (symbolic links included). */
export async function resolveRoots(paths: string[]): Promise<string[]> {
  return Promise.all(paths.map(async (p) => realpath(resolve(p)).catch((err: NodeJS.ErrnoException) => {
    // A root that does not exist yet still bounds what may be opened once it does.
    console.error(`git: allowed path ${p}: ${err.code ?? err.message}`);
    return resolve(p);
  })));
}

const outside = (repoPath: string, roots: string[], what = '') => new Error(
  `Repository path '${repoPath}'${what} is outside the allowed repository '${roots.join("', '")}'`,
);

/**
 * Checks repo_path, and the work tree and git directories git finds from it, against the allowed
 * roots (none: any repository), all with symbolic links resolved; answers the checked directories.
 */
export async function openRepo(repoPath: string, roots: string[]): Promise<Repo> {
  const abs = resolve(repoPath);
  // the reference server's messages: with roots, a path that does not resolve is invalid
  const real = await realpath(abs).catch(() => {
    throw new Error(roots.length > 0 ? `Invalid path: ${repoPath}` : `${repoPath} does not exist`);
  });
  const allowed = (path: string) => roots.length === 0 || roots.some((root) => within(root, path));
  if (!allowed(real)) throw outside(repoPath, roots);
  const found = await discover(real);
  if (!found) throw new Error(`${repoPath} is not a valid Git repository`);
  const [workTree, gitDir, commonDir] = await Promise.all([found.workTree, found.gitDir, found.commonDir].map((dir) => realpath(dir).catch(() => {
    throw new Error(`${repoPath} is not a valid Git repository: its ${dir} does not exist`);
  })));
  if (!allowed(workTree)) throw outside(repoPath, roots, `'s work tree '${workTree}'`);
  if (!allowed(gitDir)) throw outside(repoPath, roots, `'s git directory '${gitDir}'`);
  if (!allowed(commonDir)) throw outside(repoPath, roots, `'s git directory '${commonDir}'`);
  // git runs where the call named, so that relative paths (git_add's files) are as before; in a
  // work tree elsewhere (core.worktree naming another allowed directory), at its top
  return { cwd: within(workTree, real) ? real : workTree, gitDir, workTree };
}
