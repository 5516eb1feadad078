/**
 * A newc ("070701") cpio archive, the format the Linux kernel unpacks as an initramfs. Only
 * what an initramfs needs: directories and regular files, owned by root, no hard links.
 */
export interface CpioEntry {
  path: string;
  mode: number;
  data?: Buffer;
}

const pad4 = (n: number) => (4 - (n % 4)) % 4;
const hex = (n: number) => n.toString(16).padStart(8, '0');

export function cpioArchive(entries: CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  let ino = 1;
  const add = (path: string, mode: number, data: Buffer) => {
    const name = Buffer.from(`${path}\0`);
    const header = '070701' + [ino++, mode, 0, 0, 1, 0, data.length, 0, 0, 0, 0, name.length, 0].map(hex).join('');
    parts.push(Buffer.from(header), name, Buffer.alloc(pad4(110 + name.length)), data, Buffer.alloc(pad4(data.length)));
  };
  for (const e of entries) add(e.path, e.mode, e.data ?? Buffer.alloc(0));
  add('TRAILER!!!', 0, Buffer.alloc(0));
  return Buffer.concat(parts);
}

export const CPIO_DIR = 0o040000;
export const CPIO_FILE = 0o100000;
