/**
 * The operations of svc's `git` server, run with the `git` binary, each answering the text the
 * Python mcp-server-git answers (or throwing an Error whose message the tool returns). Git runs
 * as root on the sandbox user's repositories, with their own programs set off (git-run.ts); which
 * repositories a call may open is this server's own check (git-repo.ts, `paths`).
 */
import { existsSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { within } from './git-repo.ts';
import { DIFF_FLAGS, git, run, type Repo } from './git-run.ts';


function noFlag(what: string, value: string | undefined | null): void {
  if (value && value.startsWith('-')) throw new Error(`Invalid ${what}: '${value}' - cannot start with '-'`);
}

const hasHead = async (repo: Repo) => (await run(repo, ['rev-parse', '--verify', '-q', 'HEAD'])).code === 0;

async function verifyRevision(repo: Repo, revision: string): Promise<void> {
  // `<rev>:<path>` names an object already, and `^{object}` after it would be read as part of the path.
  const spec = revision.includes(':') ? revision : `${revision}^{object}`;
  if ((await run(repo, ['rev-parse', '--verify', '-q', spec])).code !== 0) throw new Error(`Ref '${revision}' did not resolve to an object`);
}

export const status = async (repo: Repo) => `Repository status:\n${await git(repo, ['status'])}`;

export const diffUnstaged = async (repo: Repo, context: number) => `Unstaged changes:\n${await git(repo, ['diff', ...DIFF_FLAGS, `--unified=${context}`])}`;

export const diffStaged = async (repo: Repo, context: number) => `Staged changes:\n${await git(repo, ['diff', ...DIFF_FLAGS, `--unified=${context}`, '--cached'])}`;

export async function diff(repo: Repo, target: string, context: number): Promise<string> {
  noFlag('target', target);
  await verifyRevision(repo, target);
  return `Diff with ${target}:\n${await git(repo, ['diff', ...DIFF_FLAGS, `--unified=${context}`, target])}`;
}

/** Who commits when the repository names nobody: GitPython's fallback, the user at this host. */
async function identityEnv(repo: Repo): Promise<NodeJS.ProcessEnv> {
  const env = { ...process.env };
  const user = userInfo().username;
  if ((await run(repo, ['config', '--get', 'user.name'])).code !== 0) env.GIT_AUTHOR_NAME = env.GIT_COMMITTER_NAME = env.GIT_AUTHOR_NAME ?? user;
  if ((await run(repo, ['config', '--get', 'user.email'])).code !== 0) env.GIT_AUTHOR_EMAIL = env.GIT_COMMITTER_EMAIL = env.GIT_AUTHOR_EMAIL ?? `${user}@${hostname()}`;
  return env;
}

export async function commit(repo: Repo, message: string): Promise<string> {
  const merging = existsSync(join(repo.gitDir, 'MERGE_HEAD'));
  const staged = merging || (await hasHead(repo)
    ? (await run(repo, ['diff', ...DIFF_FLAGS, '--cached', '--quiet'])).code === 1
    : (await git(repo, ['ls-files'])) !== '');
  if (!staged) throw new Error('No changes staged for commit. Use git_add to stage changes first; git_status shows what is currently staged.');
  // --no-verify: GitPython's index.commit runs no hooks either.
  await git(repo, ['commit', '--no-verify', '-q', '-m', message], await identityEnv(repo));
  return `Changes committed successfully with hash ${await git(repo, ['rev-parse', 'HEAD'])}`;
}

export async function add(repo: Repo, files: string[]): Promise<string> {
  if (files.length === 0) throw new Error("No files provided to stage. Pass one or more paths, or ['.'] to stage everything.");
  const root = repo.workTree;
  if (!(files.length === 1 && files[0] === '.')) {
    for (const f of files) if (!within(root, resolve(repo.cwd, f))) throw new Error(`Path '${f}' is outside the repository '${root}'`);
  }
  const entries = () => git(repo, ['ls-files', '--stage', '--', ...files]);
  const before = await entries();
  await git(repo, ['add', '--', ...files]);
  if ((await entries()) === before) return 'No changes were staged: the given paths had nothing new to stage. git_status shows what is modified or untracked.';
  return 'Files staged successfully';
}

export async function reset(repo: Repo): Promise<string> {
  if (await hasHead(repo)) await git(repo, ['reset', '-q']);
  else await git(repo, ['read-tree', '--empty']);
  return 'All staged changes reset';
}

export async function log(repo: Repo, maxCount: number, since?: string, until?: string): Promise<string> {
  noFlag('start_timestamp', since);
  noFlag('end_timestamp', until);
  const args = ['log', `--max-count=${maxCount}`, '--date=format:%Y-%m-%d %H:%M:%S%z', '--format=%H%x1f%an%x1f%ad%x1f%B%x1e'];
  if (since) args.push(`--since=${since}`);
  if (until) args.push(`--until=${until}`);
  const out = await git(repo, args);
  const entries = out.split('\x1e').map((s) => s.replace(/^\n/, '')).filter((s) => s !== '').map((record) => {
    const [sha, author, date, message] = record.split('\x1f');
    // Python prints the datetime's offset as +01:00.
    return `Commit: ${sha}\nAuthor: ${author}\nDate: ${date.replace(/([+-]\d{2})(\d{2})$/, '$1:$2')}\nMessage: ${message}\n`;
  });
  return `Commit history:\n${entries.join('\n')}`;
}

export async function createBranch(repo: Repo, name: string, base?: string | null): Promise<string> {
  noFlag('branch name', name);
  noFlag('base branch', base);
  let from = base ?? '';
  if (base) await verifyRevision(repo, base);
  else {
    const active = await run(repo, ['symbolic-ref', '--short', '-q', 'HEAD']);
    if (active.code !== 0) throw new Error('HEAD is detached: name a base_branch');
    from = active.stdout.trim();
  }
  if ((await run(repo, ['show-ref', '--verify', '-q', `refs/heads/${name}`])).code === 0) {
    throw new Error(`Cannot create branch '${name}': refs/heads/${name} already exists`);
  }
  await git(repo, ['branch', name, ...(base ? [base] : [])]);
  return `Created branch '${name}' from '${from}'`;
}

export async function checkout(repo: Repo, name: string): Promise<string> {
  noFlag('branch name', name);
  await verifyRevision(repo, name);
  await git(repo, ['checkout', '-q', name]);
  const active = await run(repo, ['symbolic-ref', '--short', '-q', 'HEAD']);
  if (active.code !== 0) return `HEAD is now detached at ${(await git(repo, ['rev-parse', 'HEAD'])).slice(0, 7)}`;
  return `Switched to branch '${active.stdout.trim()}'`;
}

export async function show(repo: Repo, revision: string): Promise<string> {
  noFlag('revision', revision);
  await verifyRevision(repo, revision);
  const type = await git(repo, ['cat-file', '-t', revision]);
  if (type === 'blob') return git(repo, ['cat-file', 'blob', revision]);
  if (type === 'tree') {
    const listing = await git(repo, ['ls-tree', revision]);
    return listing.split('\n').filter(Boolean).map((line) => {
      const [meta, name] = line.split('\t');
      return meta.split(' ')[1] === 'tree' ? `${name}/` : name;
    }).join('\n');
  }
  // A commit (a tag is shown as the commit it names): `git show --date=iso`'s header, then the patch.
  const header = await git(repo, ['show', ...DIFF_FLAGS, '-s', '--date=format:%Y-%m-%d %H:%M:%S %z', '--format=commit %H%nAuthor: %an <%ae>%nDate:   %ad%n%n%w(0,4,4)%B', revision]);
  const patch = await git(repo, ['show', ...DIFF_FLAGS, '--format=', '--patch', '--no-color', revision]);
  return `${header.replace(/\s+$/, '')}\n\n${patch.replace(/^\n+/, '')}`;
}

export async function branch(repo: Repo, type: string, contains?: string | null, notContains?: string | null): Promise<string> {
  noFlag('contains value', contains);
  noFlag('not_contains value', notContains);
  const flags: Record<string, string[]> = { local: [], remote: ['-r'], all: ['-a'] };
  if (!Object.hasOwn(flags, type)) throw new Error(`Invalid branch type: ${type}`);
  return git(repo, ['branch', ...flags[type], ...(contains ? ['--contains', contains] : []), ...(notContains ? ['--no-contains', notContains] : [])]);
}
