import { stat, writeFile } from 'node:fs/promises';
import { ConnectError } from '../connect/code.ts';
import type { ProcessConfig, StartRequest } from '@svc/contracts/envd/process/process_pb';
import type { EnvdState } from '../state.ts';
import { resolvePath } from '../system/paths.ts';
import type { User } from '../system/users.ts';
import { findExecutable } from './executable.ts';
import type { LaunchSpec } from './launch-spec.ts';
import type { ManagedProcess } from './managed-process.ts';
import { PipedProcess } from './piped-process.ts';
import { asUser } from './privileges.ts';
import { PtyProcess } from './pty-process.ts';
import { TtyKeySignals } from './pty-signals.ts';
import { SpawnedProcess } from './spawned-process.ts';
import { SpawnerUnavailable, type Spawner } from './spawner.ts';

const fallbackPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Starts processes for Process.Start: user, cwd, environment and executable resolved first. */
export class ProcessLauncher {
  /** envd's part of the line discipline where the kernel lacks it (pty-signals.ts). */
  private readonly ttyKeys: TtyKeySignals | undefined;

  constructor(
    private readonly state: EnvdState,
    /** Starts piped processes cheaply where there is one (spawner.ts); Node's spawn otherwise. */
    private readonly spawner?: Spawner,
    private readonly envdPath = process.env.PATH || fallbackPath,
  ) {
    this.ttyKeys = spawner && new TtyKeySignals(spawner);
  }

  async launch(request: StartRequest, user: User): Promise<ManagedProcess> {
    const config = request.process;
    if (!config) throw new ConnectError('invalid_argument', 'process config is required');
    const cwd = await this.workingDirectory(config.cwd, user);
    const env = this.environment(user, config.envs);
    const executable = await findExecutable(config.cmd, cwd, env.PATH);
    const groups = this.state.users.groupIds(user);
    const tag = request.tag;
    const spec = (opts: Parameters<typeof asUser>[4], exec = { file: executable, args: config.args }): LaunchSpec => ({
      ...asUser(user, groups, exec.file, exec.args, opts),
      cwd,
      env,
      displayCommand: [config.cmd, ...config.args].join(' '),
    });
    const keys = request.pty && this.ttyKeys && (await this.ttyKeys.needed()) ? this.ttyKeys : undefined;
    const proc = request.pty
      // node-pty keeps envd's groups when it switches user.
      ? PtyProcess.start(spec({}, keys?.sessionExec(executable, config.args)), config, tag, request.pty.size?.cols ?? 0, request.pty.size?.rows ?? 0, keys)
      : await this.startPiped(spec, groups, config, tag, request.stdin ?? true);
    // Under memory pressure the kernel should pick user processes before envd.
    writeFile(`/proc/${proc.pid}/oom_score_adj`, '100').catch(() => { /* a runtime without oom_score_adj (gVisor) or a process already gone: no preference is fine */ });
    return proc;
  }

  private async startPiped(spec: (opts: Parameters<typeof asUser>[4]) => LaunchSpec, groups: number[], config: ProcessConfig, tag: string | undefined, withStdin: boolean): Promise<ManagedProcess> {
    if (this.spawner?.available) {
      try {
        return await SpawnedProcess.start(this.spawner, spec({ spawnSetsGroups: true }), groups, config, tag, withStdin);
      } catch (err) {
        // The spawner died since: start this one (and the next) with Node's spawn.
        if (!(err instanceof SpawnerUnavailable)) throw err;
      }
    }
    // Node's child_process clears the groups when it switches user.
    return PipedProcess.start(spec({ spawnClearsGroups: true }), config, tag, withStdin);
  }

  private async workingDirectory(requested: string | undefined, user: User): Promise<string> {
    const cwd = resolvePath(requested ?? '', user, this.state.defaultWorkdir);
    let info;
    try {
      info = await stat(cwd);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // An image whose user has no home directory still runs commands: from the root then.
      if (!requested && (code === 'ENOENT' || code === 'ENOTDIR')) return '/';
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new ConnectError('invalid_argument', `cwd '${cwd}' does not exist`);
      throw new ConnectError('invalid_argument', `cwd '${cwd}' is not usable: ${(err as Error).message}`);
    }
    if (!info.isDirectory()) throw new ConnectError('invalid_argument', `cwd '${cwd}' is not a directory`);
    return cwd;
  }

  /** PATH, the user's identity, the sandbox's variables, then the request's (last one wins). */
  private environment(user: User, requested: Record<string, string>): Record<string, string> {
    return {
      PATH: this.envdPath,
      HOME: user.home,
      USER: user.name,
      LOGNAME: user.name,
      ...this.state.envVars(),
      ...requested,
    };
  }
}
