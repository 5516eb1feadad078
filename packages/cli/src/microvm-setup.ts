import { spawn } from 'node:child_process';
import { existsSync, readlinkSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostCommandEnv, runtimeSetting, type SvcConfig } from '@svc/common';

/** Where scripts/guest-kernel.sh puts the guest kernels, and where `current` points. */
const KERNEL_ROOT = '/var/lib/svc/guest-kernel';
const DEFAULT_KERNEL_DIR = `${KERNEL_ROOT}/current`;
/**
 * The minimal kernel's compile, in core-seconds: 491 s on this repository's 2-core machines
 * (docs/quickstart.md), plus about a minute to fetch and unpack linux-source, which does not
 * shrink with cores.
 */
const KERNEL_BUILD_CORE_SECONDS = 860;
const KERNEL_FETCH_SECONDS = 60;

/** The scripts `svc up` runs from the repository (as root). */
const SCRIPTS = ['install-system-deps.sh', 'guest-kernel.sh', 'guest-kernel-build.sh'];

/**
 * The repository's scripts/ (install-system-deps.sh, guest-kernel*.sh): above this module in
 * the checkout (packages/cli/src) or beside the bundle's dist/. Undefined for an svc installed
 * without them, which then says which command to run instead of running it. Run as root, they
 * must be root's and writable by root only, and so must the directories they sit in: svc up runs
 * them as root, and a checkout another user may change (a bundle unpacked in a user's home, a
 * `scripts/` in a writable directory up to five levels above it) was theirs to run as root.
 * Their owner may also be whoever owns this module's own file (`sudo svc up` from a user's
 * checkout): that user already decides what root runs.
 * `refused` hears why a scripts/ that was found is not run.
 */
export function repositoryScripts(from = dirname(fileURLToPath(import.meta.url)), uid = process.getuid?.(), refused?: (why: string) => void): string | undefined {
  for (let dir = from, i = 0; i < 5; i++, dir = dirname(dir)) {
    const scripts = join(dir, 'scripts');
    if (!existsSync(join(scripts, 'guest-kernel-build.sh'))) continue;
    const why = uid === 0 ? untrusted([dir, scripts, ...SCRIPTS.map((s) => join(scripts, s))], ownerOf(fileURLToPath(import.meta.url))) : undefined;
    if (why === undefined) return scripts;
    refused?.(`${why}: svc up runs these scripts as root; chown root and chmod go-w them, or run them yourself`);
    return undefined;
  }
  return undefined;
}

/** The first path that is not root's, or that others may write, said as a reason; undefined when all are root's alone. */
function untrusted(paths: string[], codeOwner: number | undefined): string | undefined {
  for (const p of paths) {
    let st;
    try {
      st = statSync(p);
    } catch {
      continue; // a script this checkout lacks is never run
    }
    if (st.uid !== 0 && st.uid !== codeOwner) return `${p} belongs to uid ${st.uid}, not root (nor the owner of svc's own files)`;
    if (st.mode & 0o022) return `${p} may be changed by other users (mode 0${(st.mode & 0o777).toString(8)})`;
  }
  return undefined;
}

function ownerOf(file: string): number | undefined {
  try {
    return statSync(file).uid;
  } catch {
    return undefined; // a bundle read from nowhere on disk: root alone is trusted
  }
}

/** What the microvm runtime needs set up before the node agent starts, for a node_agent.runtime setting. */
export function microvmNeed(runtime: string, hasKvm = existsSync('/dev/kvm')): 'run' | 'probe' | 'none' {
  const setting = runtimeSetting(runtime);
  if (Array.isArray(setting)) return setting.includes('microvm') ? 'run' : 'none';
  // auto takes microvm only where a KVM guest boots, which only a probe guest can tell.
  return setting === 'auto' && hasKvm ? 'probe' : 'none';
}

/** Whether the guest kernel in use is the minimal one svc builds (custom-<version>-<hash>), not Debian's. */
export function minimalKernelCurrent(kernelDir = DEFAULT_KERNEL_DIR): boolean {
  try {
    return readlinkSync(kernelDir).startsWith('custom-');
  } catch {
    // No `current` link (nothing installed yet) or a directory the operator set: not ours to judge.
    return false;
  }
}

/** How long the minimal kernel takes to build here, in whole minutes, for the line that announces it. */
export function kernelBuildMinutes(cores = availableParallelism()): number {
  return Math.max(1, Math.round((KERNEL_BUILD_CORE_SECONDS / Math.max(1, cores) + KERNEL_FETCH_SECONDS) / 60));
}

export interface MicrovmSetupOptions {
  cfg: SvcConfig;
  say: (line: string) => void;
  /** Default: the repository's scripts/ when there is one. */
  scriptsDir?: string;
}

/**
 * Makes what the microvm runtime needs when `svc up` will use it or must probe for it (docs/
 * runtimes.md, "Set-up"): its packages and Debian's guest kernel (seconds), and where microvm is
 * asked for by name the minimal kernel, compiled once per machine with a line that says how
 * long it takes. A host that will run gVisor only gets none of it. Without the repository's
 * scripts it names the commands instead; the node agent then says what is missing.
 */
export async function prepareMicrovm(o: MicrovmSetupOptions): Promise<void> {
  const need = microvmNeed(o.cfg.node_agent.runtime);
  if (need === 'none') return;
  await prepare(need, o).catch((err: Error) => {
    // Without them the probe fails and auto takes gVisor, as on a host without KVM.
    if (need === 'probe') o.say(`svc: ${err.message}; runtime auto cannot probe KVM and takes gVisor`);
    else throw err;
  });
}

async function prepare(need: 'run' | 'probe', o: MicrovmSetupOptions): Promise<void> {
  const scripts = o.scriptsDir ?? repositoryScripts(undefined, undefined, (why) => o.say(`svc: the repository's scripts are not run: ${why}`));
  const kernelDir = o.cfg.node_agent.guest_kernel_dir;
  const ours = kernelDir === DEFAULT_KERNEL_DIR;
  const what = need === 'run' ? 'the microvm runtime' : 'the KVM probe of runtime auto';

  if (!existsSync('/usr/bin/qemu-system-x86_64') || !existsSync('/bin/busybox')) {
    if (!scripts) { o.say(`svc: ${what} needs QEMU and busybox-static: run scripts/install-system-deps.sh microvm from svc's repository`); return; }
    o.say(`svc: installing ${what}'s packages (QEMU, busybox-static)`);
    await runScript(join(scripts, 'install-system-deps.sh'), ['microvm'], o.say, 'packages');
  }
  if (ours && !existsSync(join(kernelDir, 'vmlinuz'))) {
    if (!scripts) { o.say(`svc: ${what} needs a guest kernel: run scripts/guest-kernel.sh from svc's repository`); return; }
    o.say(`svc: fetching Debian's guest kernel for ${what}`);
    await runScript(join(scripts, 'guest-kernel.sh'), [], o.say, 'guest kernel');
  }
  if (need === 'run' && ours && !minimalKernelCurrent(kernelDir) && process.env.SVC_GUEST_KERNEL !== 'debian') {
    if (!scripts) { o.say(`svc: microvm guests boot Debian's kernel; scripts/guest-kernel-build.sh --make-current builds the minimal one (boots three times as fast)`); return; }
    o.say(`svc: building the minimal guest kernel for the microvm runtime, once per machine: about ${kernelBuildMinutes()} min on ${availableParallelism()} cores (SVC_GUEST_KERNEL=debian skips it)`);
    const started = Date.now();
    await runScript(join(scripts, 'guest-kernel-build.sh'), ['--make-current'], o.say, 'guest kernel', started).catch((err: Error) => {
      // Debian's kernel, installed above, still boots the guests: slower, not broken.
      o.say(`svc: the minimal guest kernel did not build (${err.message}); microvm guests boot Debian's kernel`);
    });
  }
}

/** After start: where runtime auto chose microvm on Debian's kernel, the line that says how to get the faster one. */
export function minimalKernelHint(runtimes: readonly string[], cfg: SvcConfig): string | undefined {
  if (!runtimes.includes('microvm') || cfg.node_agent.guest_kernel_dir !== DEFAULT_KERNEL_DIR || minimalKernelCurrent()) return undefined;
  if (process.env.SVC_GUEST_KERNEL === 'debian') return undefined;
  return `svc: microvm guests boot Debian's kernel; scripts/setup.sh --microvm builds the minimal one once (about ${kernelBuildMinutes()} min here), which boots three times as fast`;
}

/** Runs one of the repository's scripts, each line of its output said with a prefix (and the minutes so far when `since` is given). */
function runScript(path: string, args: string[], say: (line: string) => void, prefix: string, since?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    // apt's maintainer scripts and the kernel's make need none of svc's secrets (host-command-env.ts).
    const child = spawn(path, args, { stdio: ['ignore', 'pipe', 'pipe'], env: hostCommandEnv() });
    const tail: string[] = [];
    const onData = (chunk: Buffer) => {
      for (const raw of chunk.toString().split('\n')) {
        const line = raw.trim();
        if (!line) continue;
        tail.push(line);
        if (tail.length > 5) tail.shift();
        const elapsed = since === undefined ? '' : ` [${Math.round((Date.now() - since) / 1000)} s]`;
        say(`  ${prefix}: ${line.replace(/^[a-z ]+: /, '')}${elapsed}`);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${path} exited ${code}: ${tail.join(' | ')}`))));
  });
}
