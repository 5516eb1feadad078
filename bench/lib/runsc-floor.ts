/**
 * The floor every create is compared with: `runsc run` of a root filesystem in a prepared
 * network namespace, with envd injected exactly as the node agent does, until envd answers
 * /health. No platform around it.
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { silentLogger } from '@svc/common';
import { envdHealthy } from '../../packages/node-agent/src/envd-client.ts';
import { run } from '../../packages/node-agent/src/host/exec.ts';
import { ResourceNames } from '../../packages/node-agent/src/names.ts';
import { AddressPool } from '../../packages/node-agent/src/network/address-pool.ts';
import { createSandboxLink, destroySandboxLink, netnsPath } from '../../packages/node-agent/src/network/netns.ts';
import { GvisorDriver } from '../../packages/node-agent/src/runtime/gvisor.ts';
import type { HostMount } from '../../packages/node-agent/src/runtime/driver.ts';
import { ociSpec } from '../../packages/node-agent/src/runtime/oci-spec.ts';
import { defaultNativeFile, defaultPtyModulesDir, ensureRuntimeBundle, SANDBOX_INIT } from '../../packages/node-agent/src/runtime/runtime-bundle.ts';
import { sleep, timed } from './stats.ts';

export interface FloorOptions {
  /** ext4 root filesystem image. */
  image: string;
  envdBundle: string;
  workDir: string;
  /** An address pool of its own, e.g. 10.201.101.0/24. */
  pool: string;
  n: number;
}

/** Prepared once, then one `runsc run` at a time, so floor runs can be interleaved with others. */
export class RunscFloor {
  private readonly names: ResourceNames;
  private readonly driver: GvisorDriver;
  private readonly pool: AddressPool;
  private readonly lower: string;
  private bundle: Awaited<ReturnType<typeof ensureRuntimeBundle>> | undefined;

  constructor(private readonly o: Omit<FloorOptions, 'n'>) {
    this.names = new ResourceNames(o.workDir);
    this.driver = new GvisorDriver({ stateRoot: join(o.workDir, 'runsc'), names: this.names, logger: silentLogger() });
    this.pool = new AddressPool(o.pool);
    this.lower = join(o.workDir, 'lower');
  }

  async prepare(): Promise<void> {
    this.bundle = await ensureRuntimeBundle(this.o.workDir, { envdBundle: this.o.envdBundle, nodeBinary: process.execPath, init: SANDBOX_INIT, statShim: defaultNativeFile(this.o.envdBundle, 'svc-stat-shim.so'), sudo: defaultNativeFile(this.o.envdBundle, 'svc-sudo'), spawner: defaultNativeFile(this.o.envdBundle, 'svc-spawner'), codeInterpreter: defaultNativeFile(this.o.envdBundle, 'code-interpreter.mjs'), mcpGateway: defaultNativeFile(this.o.envdBundle, 'mcp-gateway'), ptyModulesDir: defaultPtyModulesDir() });
    await mkdir(this.lower, { recursive: true });
    await run('mount', ['-t', 'ext4', '-o', 'loop,ro,noload', this.o.image, this.lower]);
  }

  /**
   * One sandbox: namespace and overlay made first (untimed), then `runsc run` until envd answers.
   * `mounts`: host directories bound into it, as volumes are.
   */
  async runOnce(mounts: HostMount[] = []): Promise<number> {
    const { names } = this;
    const id = ResourceNames.newInstanceId();
    const addr = this.pool.allocate();
    const ns = names.netns(id);
    const ref = { instanceId: id, dir: join(this.o.workDir, 'i', id), netnsPath: netnsPath(ns) };
    await createSandboxLink(ns, names.hostVeth(id), addr);
    try {
      const b = join(ref.dir, 'bundle');
      for (const d of ['upper', 'work', 'rootfs', 'bundle']) await mkdir(join(ref.dir, d), { recursive: true });
      await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${this.lower},upperdir=${ref.dir}/upper,workdir=${ref.dir}/work`, join(ref.dir, 'rootfs')]);
      const spec = { ...ref, rootfs: { imagePath: this.o.image, mountDir: this.lower }, runtime: this.bundle!, resources: { cpuCount: 1, memoryMB: 512, diskSizeMB: 2048 }, env: {}, hostname: 'sandbox', files: {}, mounts };
      await writeFile(join(b, 'config.json'), JSON.stringify(ociSpec(spec, join(ref.dir, 'rootfs'), `/${names.cgroupParent}/${names.container(id)}`)));
      const [ms] = await timed(async () => {
        await new Promise<void>((resolve, reject) => {
          const p = spawn('nsenter', [`--net=${ref.netnsPath}`, 'runsc', `--root=${join(this.o.workDir, 'runsc')}`, '--platform=ptrace', '--network=host',
            '--cpu-num-from-quota', 'run', '--detach', `--bundle=${b}`, names.container(id)], { stdio: 'ignore' });
          p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`runsc run exited ${code}`))));
        });
        while (!(await envdHealthy(addr.sandboxAddress, 250))) await sleep(2);
      });
      return ms;
    } finally {
      await this.driver.destroy(ref);
      await destroySandboxLink(ns, names.hostVeth(id));
      this.pool.release(addr.slot);
    }
  }

  async close(): Promise<void> {
    await this.driver.settled();
    await this.driver.removeParentCgroups();
    await run('umount', [this.lower], { allowFail: true });
  }
}

export async function measureRunscFloor(o: FloorOptions): Promise<number[]> {
  const floor = new RunscFloor(o);
  await floor.prepare();
  const samples: number[] = [];
  try {
    for (let i = 0; i < o.n; i++) samples.push(await floor.runOnce());
  } finally {
    await floor.close();
  }
  return samples;
}
