import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@svc/common';

const PROBE_TIMEOUT_MS = 10_000;

/**
 * Which gVisor platform this host can run: `kvm` where a KVM sandbox really starts, else
 * `ptrace`. Some hosts offer a /dev/kvm on which a sandbox hangs (nested or PVM-only
 * virtualisation), so KVM is tried once, running Node, with a short deadline and the answer is kept
 * machine-wide per kernel release. SVC_GVISOR_PLATFORM forces a platform.
 */
export async function chooseGvisorPlatform(logger: Logger, runsc = 'runsc', cacheDir = '/var/cache/svc'): Promise<string> {
  const forced = process.env.SVC_GVISOR_PLATFORM;
  if (forced) return forced;
  if (!existsSync('/dev/kvm')) return 'ptrace';
  await mkdir(cacheDir, { recursive: true });
  const cacheFile = join(cacheDir, 'gvisor-platform.json');
  const cached = await readFile(cacheFile, 'utf8').then((t) => JSON.parse(t) as { kernel: string; platform: string }, () => { /* no answer kept yet: probed below */ return undefined; });
  if (cached?.kernel === release()) return cached.platform;
  const platform = (await kvmStarts(runsc)) ? 'kvm' : 'ptrace';
  logger.info({ platform, kernel: release() }, platform === 'kvm' ? 'gVisor runs on KVM here' : 'gVisor KVM does not start on this host; using ptrace');
  await writeFile(cacheFile, JSON.stringify({ kernel: release(), platform }) + '\n');
  return platform;
}

/**
 * A KVM sandbox "starts" when Node itself runs in it and prints: /bin/true alone can pass where
 * a real workload (threads, a JIT, more memory) hangs. `runsc do` runs it over the host's root.
 */
async function kvmStarts(runsc: string): Promise<boolean> {
  const root = await mkdtemp(join(tmpdir(), 'svc-kvm-probe-'));
  try {
    return await new Promise<boolean>((resolve) => {
      const child = spawn(runsc, [`--root=${root}`, '--platform=kvm', '--network=none', 'do', process.execPath, '-e', "console.log('svc-kvm-' + 'ok')"],
        { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
      let out = '';
      child.stdout!.on('data', (d) => { out += d; });
      const timer = setTimeout(() => {
        try { process.kill(-child.pid!, 'SIGKILL'); } catch { child.kill('SIGKILL'); }
        resolve(false);
      }, PROBE_TIMEOUT_MS);
      child.on('close', (code) => { clearTimeout(timer); resolve(code === 0 && out.includes('svc-kvm-ok')); });
      child.on('error', () => { clearTimeout(timer); resolve(false); });
    });
  } finally {
    await rm(root, { recursive: true, force: true }).catch((err: Error) => console.error(`gvisor platform probe: could not remove ${root}: ${err.message}`));
  }
}
