import { join } from 'node:path';
import { DiskLayer } from '../disk-layer.ts';

/** The files of a microvm instance's directory. */
export function microvmPaths(dir: string) {
  const layer = new DiskLayer(dir);
  return {
    layer, rootfs: join(dir, 'rootfs'), console: join(dir, 'console.log'), qmp: join(dir, 'qmp.sock'), pid: join(dir, 'qemu.pid'),
    state: join(dir, 'memory.state'), launch: join(dir, 'launch.json'), machine: join(dir, 'machine.json'),
  };
}
