import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { run, runInBackground } from '../../host/exec.ts';
import { isMountPoint, unmount } from '../../host/mounts.ts';
import type { HostMount } from '../driver.ts';

/** Debian's QEMU ships the C virtiofsd beside its other helpers. */
const VIRTIOFSD = '/usr/lib/qemu/virtiofsd';

/** One volume as the guest sees it: a virtiofs tag mounted at `path`. */
export interface GuestVolume extends HostMount {
  tag: string;
  socket: string;
}

/**
 * Volumes reach a microvm guest over virtiofs: one virtiofsd per mount, serving the host path
 * on a vhost-user socket in the instance's directory, which QEMU connects to. A read-only mount
 * is served from a read-only bind of the host path (`<dir>/volumes/<n>`), so a guest's root
 * cannot write through it by remounting. virtiofsd ends when QEMU disconnects (pause, stop,
 * kill); a boot starts them again.
 */
export function guestVolumes(dir: string, mounts: HostMount[]): GuestVolume[] {
  return mounts.map((m, i) => ({ ...m, tag: `svcvol${i}`, socket: join(dir, `virtiofs-${i}.sock`) }));
}

/** Starts each volume's virtiofsd and waits for its socket. */
export async function startVolumeServers(dir: string, volumes: GuestVolume[]): Promise<void> {
  for (const [i, v] of volumes.entries()) {
    let source = v.hostPath;
    if (v.readOnly) {
      source = join(dir, 'volumes', String(i));
      await mkdir(source, { recursive: true });
      if (!(await isMountPoint(source))) {
        await run('mount', ['--bind', v.hostPath, source]);
        await run('mount', ['-o', 'remount,bind,ro', source]);
      }
    }
    await rm(v.socket, { force: true });
    // Its messages go to virtiofs-<n>.log in the instance's directory (detached, it has no other place).
    const argv = [VIRTIOFSD, `--socket-path=${v.socket}`, '-o', `source=${source}`, '-o', 'cache=auto', '-o', 'xattr'];
    const started = await runInBackground('/bin/sh', ['-c', 'exec "$@" >>"$0" 2>&1', join(dir, `virtiofs-${i}.log`), ...argv], 50);
    if (started.code !== 0) throw new Error(`virtiofsd for ${v.path} did not start (exit ${started.code}) ${started.stderr}`.trim());
    const deadline = Date.now() + 5_000;
    while (!existsSync(v.socket)) {
      if (Date.now() > deadline) throw new Error(`virtiofsd for ${v.path} opened no socket within 5 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/** QEMU's side: memory a vhost-user device can share, and one device per volume. */
export function volumeQemuArgs(volumes: GuestVolume[], memoryMB: number): string[] {
  if (!volumes.length) return [];
  return [
    '-object', `memory-backend-memfd,id=mem,size=${memoryMB}M,share=on`, '-machine', 'memory-backend=mem',
    ...volumes.flatMap((v) => ['-chardev', `socket,id=${v.tag},path=${v.socket}`, '-device', `vhost-user-fs-device,chardev=${v.tag},tag=${v.tag}`]),
  ];
}

/** What the guest's init reads (packages/node-agent/guest/init.sh): "tag ro|rw path" a line. */
export function volumeBootFile(volumes: GuestVolume[]): string {
  return volumes.map((v) => `${v.tag} ${v.readOnly ? 'ro' : 'rw'} ${v.path}\n`).join('');
}

/** virtiofsd processes still serving this instance (one whose QEMU never connected, after a failed boot). */
export async function endVolumeServers(dir: string): Promise<void> {
  const marker = `--socket-path=${dir}/`;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* it ended while /proc was read */ return ''; })).split('\0');
    if (argv[0] === VIRTIOFSD && argv.some((a) => a.startsWith(marker))) { try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ } }
  }
}

/** Takes the read-only binds down (before the instance's directory goes: they lead into volumes). */
export async function releaseVolumeBinds(dir: string): Promise<void> {
  const root = join(dir, 'volumes');
  for (const name of await readdir(root).catch(() => { /* no volumes directory: the guest had no volumes */ return [] as string[]; })) {
    const bind = join(root, name);
    if (await isMountPoint(bind)) await unmount(bind);
  }
}
