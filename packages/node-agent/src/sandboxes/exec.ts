import { badRequest, conflict } from '@svc/common';
import { EXEC_OUTPUT_LIMIT, type ExecOnNode, type ExecResultOnNode } from '@svc/contracts/node-agent';
import type { ExecInputs } from '../artifacts/exec-input.ts';
import type { ExecOptions, ExecOutput } from '../runtime/driver.ts';
import type { Instance } from './instances.ts';
import type { SandboxTable } from './sandbox-table.ts';

/** A user's uid, gid and home, one a line, with nothing but `id` and the shell (busybox images too). */
const WHO_IS = 'id -u "$1" && id -g "$1" && while IFS=: read -r n _ _ _ _ h _; do [ "$n" = "$1" ] && echo "$h"; done < /etc/passwd';

export type ExecRequest = Required<Omit<ExecOnNode, 'stdin' | 'cwd'>> & Pick<ExecOnNode, 'stdin' | 'cwd'>;

/** Commands run to their end in running sandboxes (the template builder's steps). */
export class SandboxExec {
  /** Users of each sandbox's image looked up by exec (whoIs), dropped with the instance. */
  private readonly users = new WeakMap<Instance, Map<string, { uid: string; gid: string; home: string }>>();

  constructor(private readonly d: { execInputs: ExecInputs }, private readonly table: SandboxTable) {}

  /**
   * Runs a shell command in a running sandbox to its end (the template builder's steps): as root
   * through runsc, or as the user named, whose uid, gid and home the image's own passwd gives.
   */
  async exec(id: string, req: ExecRequest, onOutput?: ExecOutput): Promise<ExecResultOnNode> {
    const inst = this.table.find(id);
    if (inst.record.phase !== 'running') throw conflict(`sandbox ${id} is paused; resume it before running commands in it`);
    const env = { ...req.envVars };
    let user: ExecOptions['user'];
    let home = '/';
    if (req.user !== 'root') {
      const who = await this.whoIs(inst, req.user);
      user = { name: req.user, uid: who.uid, gid: who.gid };
      home = who.home;
      env.HOME ??= home;
      env.USER ??= req.user;
    }
    // Without a cwd a command starts in its user's home, as envd starts one (root's is /).
    const cwd = req.cwd ?? home;
    const run = (inputFile?: string) => this.table.driverOf(inst).exec(inst.ref, ['/bin/sh', '-c', req.command], { timeoutMs: req.timeoutMs, user, cwd, env, inputFile, onOutput });
    const r = req.stdin ? await this.d.execInputs.with(req.stdin, run) : await run();
    const killed = r.stderr.endsWith(`(killed after ${req.timeoutMs} ms)`);
    const tail = (text: string) => (Buffer.byteLength(text) > EXEC_OUTPUT_LIMIT ? Buffer.from(text).subarray(-EXEC_OUTPUT_LIMIT).toString('utf8') : text);
    const truncated = Buffer.byteLength(r.stdout) > EXEC_OUTPUT_LIMIT || Buffer.byteLength(r.stderr) > EXEC_OUTPUT_LIMIT;
    return { exitCode: killed ? 124 : r.code, stdout: tail(r.stdout), stderr: tail(r.stderr), ...(truncated ? { truncated } : {}) };
  }

  /**
   * A user's uid, gid and home in the sandbox's image, looked up once per sandbox (each lookup is
   * a runsc exec, about 100 ms under ptrace): a build's steps run as the same user again and again.
   * Only found users are kept, so a user a later step makes is found then.
   */
  private async whoIs(inst: Instance, user: string): Promise<{ uid: string; gid: string; home: string }> {
    let users = this.users.get(inst);
    const known = users?.get(user);
    if (known) return known;
    const who = await this.table.driverOf(inst).exec(inst.ref, ['/bin/sh', '-c', WHO_IS, 'whois', user]);
    const [uid, gid, dir] = who.stdout.trim().split('\n');
    if (who.code !== 0 || !/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '')) throw badRequest(`user ${user} does not exist in sandbox ${inst.record.sandboxId}`);
    const found = { uid: uid!, gid: gid!, home: dir || '/' };
    if (!users) { users = new Map(); this.users.set(inst, users); }
    users.set(user, found);
    return found;
  }
}
