import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CommandError, run, runInBackground, type RunResult } from '../host/exec.ts';
import type { ResourceNames } from '../names.ts';
import { appendAgentLine, consoleTailOf } from './console-file.ts';
import type { ExecOutput, InstanceRef } from './driver.ts';
import type { SandboxCgroups } from './gvisor-cgroups.ts';

export interface RunscOptions {
  /** runsc's --root: container state files of this agent. */
  stateRoot: string;
  names: ResourceNames;
  runscPath?: string;
  /** ptrace works everywhere; kvm where the host offers working KVM. */
  platform?: string;
}

/**
 * runsc invocations for this agent's root, each entered into the sandbox's network namespace
 * (its control socket is abstract, so per namespace), and runsc's state files: which sandboxes
 * exist, their processes, and how they are killed without runsc's own wait.
 */
export class Runsc {
  readonly path: string;
  private readonly platform: string;

  constructor(private readonly o: RunscOptions, private readonly cgroups: SandboxCgroups) {
    this.path = o.runscPath ?? 'runsc';
    this.platform = o.platform ?? 'ptrace';
  }

  globalFlags(): string[] {
    return [`--root=${this.o.stateRoot}`, `--platform=${this.platform}`, '--network=host', '--cpu-num-from-quota'];
  }

  cmd(ref: InstanceRef, args: string[], opts: { allowFail?: boolean; timeoutMs?: number; inputFile?: string; onOutput?: ExecOutput } = {}): Promise<RunResult> {
    return run('nsenter', [`--net=${ref.netnsPath}`, this.path, ...this.globalFlags(), ...args], { timeoutMs: opts.timeoutMs ?? 15_000, allowFail: opts.allowFail, inputFile: opts.inputFile, onOutput: opts.onOutput });
  }

  /**
   * `runsc run --detach` with the container's stdout and stderr going to console.log. The
   * sandbox processes inherit only that file, so they outlive the agent without a pipe to it.
   */
  async runDetached(netnsPath: string, id: string, paths: { bundle: string; console: string }): Promise<void> {
    await mkdir(this.o.stateRoot, { recursive: true });
    const argv = [`--net=${netnsPath}`, this.path, ...this.globalFlags(), 'run', '--detach', `--bundle=${paths.bundle}`, id];
    // Every boot is marked with its time: what runsc itself writes after it carries none (sandbox-logs.ts).
    const message = existsSync(paths.console) ? 'sandbox booting again from its files' : 'sandbox booting';
    await appendAgentLine(paths.console, message);
    const { code } = await run('nsenter', argv, { logPath: paths.console, timeoutMs: 60_000, allowFail: true });
    if (code !== 0) {
      throw new CommandError(['runsc', 'run', id], { code, stdout: '', stderr: await consoleTailOf(paths.console, 3) });
    }
  }

  /**
   * `runsc exec --detach` of this version waits ~9 s for a pid file and then reports failure
   * although the process runs. A foreground `runsc exec` left running in the background does
   * the same job; it ends with the process or the sandbox.
   */
  async execInBackground(ref: InstanceRef, id: string, argv: string[]): Promise<RunResult> {
    const { code } = await runInBackground('nsenter', [`--net=${ref.netnsPath}`, this.path, ...this.globalFlags(), 'exec', id, ...argv], 150);
    return { code, stdout: '', stderr: code ? `runsc exec exited ${code} at once` : '' };
  }

  stateFile(id: string) { return join(this.o.stateRoot, `${id}_sandbox:${id}.state`); }

  /** Instances with a state file under this agent's root. */
  async list(): Promise<string[]> {
    const ids = new Set<string>();
    for (const f of await this.stateFiles()) {
      const m = /^(.+)_sandbox:(.+)\.state$/.exec(f);
      const inst = m && this.o.names.instanceOfContainer(m[2]);
      if (inst) ids.add(inst);
    }
    return [...ids];
  }

  /** The sandbox (sentry) and gofer pids runsc's state file names; undefined without one. */
  async statePids(id: string): Promise<{ sandbox?: number; gofer?: number } | undefined> {
    try {
      const state = JSON.parse(await readFile(this.stateFile(id), 'utf8')) as { goferPid?: number; sandbox?: { pid?: number } };
      return { sandbox: state.sandbox?.pid, gofer: state.goferPid };
    } catch {
      return undefined; // no state file (never started, or deleted): nothing of runsc's to find
    }
  }

  /**
   * What `runsc delete --force` does for a root container (kill the sandbox and gofer, drop
   * the cgroups and state files), without its wait: runsc polls until the killed sandbox is
   * reaped, and the sandbox, orphaned by `run --detach`, is reaped by the host's PID 1, which
   * can take seconds. Dead is dead once the processes are zombies. False: use runsc delete.
   */
  async killAndForget(id: string): Promise<boolean> {
    const pids = await this.runscPids(id);
    if (!pids) return false;
    for (const c of ['pids', 'memory']) {
      const procs = await readFile(this.cgroups.file(c, id, 'cgroup.procs'), 'utf8').catch(() => { /* no such cgroup: no processes of it to kill */ return ''; });
      for (const p of procs.split('\n').filter(Boolean).map(Number)) pids.push(p);
    }
    for (const pid of pids) { try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ } }
    const deadline = Date.now() + 3_000;
    while (!(await Promise.all(pids.map(exited))).every(Boolean)) {
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 5));
    }
    await this.cgroups.remove(id);
    await this.removeStateFiles(id);
    return true;
  }

  /** Without its namespace the control socket is unreachable: kill the processes, then drop the state. */
  async forceDelete(id: string): Promise<void> {
    for (const pid of (await this.runscPids(id)) ?? []) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
    await run(this.path, [`--root=${this.o.stateRoot}`, 'delete', '--force', id], { allowFail: true, timeoutMs: 30_000 });
    await this.removeStateFiles(id);
  }

  /** Sandbox and gofer pids from runsc's state file, when they are runsc's (pids get reused). */
  private async runscPids(id: string): Promise<number[] | undefined> {
    const state = await this.statePids(id);
    if (!state) return undefined;
    const pids: number[] = [];
    for (const pid of [state.sandbox, state.gofer]) {
      if (!pid || pid <= 1) continue;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* no such process: it has ended */ return undefined; });
      if (cmdline === undefined) continue;
      if (!cmdline.includes('runsc')) return undefined;
      pids.push(pid);
    }
    return pids;
  }

  private async removeStateFiles(id: string): Promise<void> {
    for (const f of await this.stateFiles()) {
      if (f.startsWith(`${id}_sandbox:`)) await rm(join(this.o.stateRoot, f), { force: true });
    }
  }

  private stateFiles(): Promise<string[]> {
    return readdir(this.o.stateRoot).catch(() => { /* no root yet: runsc has made no sandbox here */ return [] as string[]; });
  }
}

/** Gone, or a zombie (dead, waiting for whoever reaps it). */
async function exited(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => { /* no such process: gone */ return undefined; });
  if (stat === undefined) return true;
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}
