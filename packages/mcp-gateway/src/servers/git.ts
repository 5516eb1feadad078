/**
 * svc's `git` server, in place of the Python mcp-server-git: the same twelve tools with the same
 * argument names (repo_path and the rest), answering the same texts (src/servers/git-ops.ts).
 * With allowed roots (the config's `paths`), a call may open repositories under them only (git-repo.ts).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import * as ops from './git-ops.ts';
import { openRepo } from './git-repo.ts';
import type { Repo } from './git-run.ts';

const CONTEXT_LINES = z.number().int().min(0).default(3);
const READ = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
const WRITE = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };

export function createGitServer(roots: string[]): McpServer {
  const server = new McpServer({ name: 'mcp-git', version: '1.0.0' });
  // One wrapper for the twelve tools: repo_path checked and opened first, a failure an isError text.
  // The SDK's callback type cannot follow a shape generic over S, hence the cast of the callback.
  const tool = <S extends z.ZodRawShape>(name: string, description: string, shape: S, annotations: typeof READ, fn: (repo: Repo, args: z.infer<z.ZodObject<S>>) => Promise<string>) => {
    server.registerTool(name, { description, inputSchema: { repo_path: z.string(), ...shape }, annotations }, (async (args: { repo_path: string } & z.infer<z.ZodObject<S>>) => {
      try {
        const repo = await openRepo(args.repo_path, roots);
        return { content: [{ type: 'text' as const, text: await fn(repo, args) }] };
      } catch (err) {
        return { content: [{ type: 'text' as const, text: (err as Error).message }], isError: true };
      }
    }) as never);
  };
  tool('git_status', 'Shows the working tree status', {}, READ, (repo) => ops.status(repo));
  tool('git_diff_unstaged', 'Shows changes in the working directory that are not yet staged', { context_lines: CONTEXT_LINES }, READ, (repo, a) => ops.diffUnstaged(repo, a.context_lines));
  tool('git_diff_staged', 'Shows changes that are staged for commit', { context_lines: CONTEXT_LINES }, READ, (repo, a) => ops.diffStaged(repo, a.context_lines));
  tool('git_diff', 'Shows differences between branches or commits', { target: z.string(), context_lines: CONTEXT_LINES }, READ, (repo, a) => ops.diff(repo, a.target, a.context_lines));
  tool('git_commit', 'Records changes to the repository', { message: z.string() }, WRITE, (repo, a) => ops.commit(repo, a.message));
  tool('git_add', 'Adds file contents to the staging area', { files: z.array(z.string()).min(1) }, { ...WRITE, idempotentHint: true }, (repo, a) => ops.add(repo, a.files));
  tool('git_reset', 'Unstages all staged changes', {}, { ...WRITE, destructiveHint: true, idempotentHint: true }, (repo) => ops.reset(repo));
  tool('git_log', 'Shows the commit logs', {
    max_count: z.number().int().min(1).default(10),
    start_timestamp: z.string().nullish().describe("Start timestamp for filtering commits. Accepts: ISO 8601 format (e.g., '2024-01-15T14:30:25'), relative dates (e.g., '2 weeks ago', 'yesterday'), or absolute dates (e.g., '2024-01-15', 'Jan 15 2024')"),
    end_timestamp: z.string().nullish().describe("End timestamp for filtering commits. Accepts: ISO 8601 format (e.g., '2024-01-15T14:30:25'), relative dates (e.g., '2 weeks ago', 'yesterday'), or absolute dates (e.g., '2024-01-15', 'Jan 15 2024')"),
  }, READ, (repo, a) => ops.log(repo, a.max_count, a.start_timestamp ?? undefined, a.end_timestamp ?? undefined));
  tool('git_create_branch', 'Creates a new branch from an optional base branch', { branch_name: z.string(), base_branch: z.string().nullish() }, WRITE, (repo, a) => ops.createBranch(repo, a.branch_name, a.base_branch));
  tool('git_checkout', 'Switches branches', { branch_name: z.string() }, WRITE, (repo, a) => ops.checkout(repo, a.branch_name));
  tool('git_show', 'Shows the contents of a commit, or of a file or directory given as <revision>:<path>', { revision: z.string() }, READ, (repo, a) => ops.show(repo, a.revision));
  tool('git_branch', 'List Git branches', {
    branch_type: z.string().describe("Whether to list local branches ('local'), remote branches ('remote') or all branches('all')."),
    contains: z.string().nullish().describe('The commit sha that branch should contain. Do not pass anything to this param if no commit sha is specified'),
    not_contains: z.string().nullish().describe('The commit sha that branch should NOT contain. Do not pass anything to this param if no commit sha is specified'),
  }, READ, (repo, a) => ops.branch(repo, a.branch_type, a.contains, a.not_contains));
  return server;
}
