import { open, type FileHandle } from 'node:fs/promises';
import { posix } from 'node:path';

export interface TarMember {
  name: string;
  type: 'file' | 'symlink' | 'hardlink' | 'directory' | 'other';
  /** Byte offset of the member's data in the archive. */
  offset: number;
  size: number;
  linkname: string;
}

const BLOCK = 512;

/**
 * Lists the members of an uncompressed tar file with the offset of each one's data, reading only
 * the headers. A docker-archive holds its layers in any order; with offsets they can be streamed
 * straight from the archive in manifest order, without unpacking it first.
 */
export async function indexTar(path: string): Promise<Map<string, TarMember>> {
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    const members = new Map<string, TarMember>();
    const header = Buffer.alloc(BLOCK);
    let pos = 0;
    let longName: string | undefined;
    let longLink: string | undefined;
    let paxPath: string | undefined;
    let paxLink: string | undefined;
    while (pos + BLOCK <= size) {
      await readExactly(fh, header, pos);
      if (header.every((b) => b === 0)) break;
      if (!checksumOk(header)) throw new Error(`${path} is not a valid tar archive (bad header at byte ${pos})`);
      const typeflag = String.fromCharCode(header[156] || 0x30);
      const dataSize = parseNumber(header.subarray(124, 136));
      const dataOffset = pos + BLOCK;
      pos = dataOffset + Math.ceil(dataSize / BLOCK) * BLOCK;
      if (typeflag === 'L' || typeflag === 'K' || typeflag === 'x') {
        if (dataSize > 1024 * 1024) throw new Error(`${path}: oversized extended header`);
        const data = Buffer.alloc(dataSize);
        await readExactly(fh, data, dataOffset);
        if (typeflag === 'L') longName = cString(data);
        else if (typeflag === 'K') longLink = cString(data);
        else ({ path: paxPath, linkpath: paxLink } = parsePax(data));
        continue;
      }
      if (typeflag === 'g') continue;
      const prefix = isUstar(header) ? cString(header.subarray(345, 500)) : '';
      const shortName = cString(header.subarray(0, 100));
      const rawName = paxPath ?? longName ?? (prefix ? `${prefix}/${shortName}` : shortName);
      const linkname = paxLink ?? longLink ?? cString(header.subarray(157, 257));
      longName = longLink = paxPath = paxLink = undefined;
      const name = normalize(rawName);
      const type = typeflag === '0' || typeflag === '7' ? 'file'
        : typeflag === '2' ? 'symlink'
        : typeflag === '1' ? 'hardlink'
        : typeflag === '5' ? 'directory' : 'other';
      members.set(name, { name, type, offset: dataOffset, size: dataSize, linkname });
    }
    return members;
  } finally {
    await fh.close();
  }
}

/** Follows symbolic and hard links between members (docker save links layer.tar files to blobs). */
export function resolveMember(members: Map<string, TarMember>, name: string): TarMember | undefined {
  let current = members.get(normalize(name));
  for (let hops = 0; current && hops < 16; hops++) {
    if (current.type === 'file') return current;
    if (current.type === 'symlink') current = members.get(normalize(posix.join(posix.dirname(current.name), current.linkname)));
    else if (current.type === 'hardlink') current = members.get(normalize(current.linkname));
    else return undefined;
  }
  return undefined;
}

function normalize(name: string): string {
  return posix.normalize(name).replace(/^(\.\/|\/)+/, '').replace(/\/$/, '');
}

async function readExactly(fh: FileHandle, buf: Buffer, pos: number) {
  const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
  if (bytesRead !== buf.length) throw new Error('tar archive is truncated');
}

function checksumOk(h: Buffer): boolean {
  const stored = parseNumber(h.subarray(148, 156));
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  return sum === stored;
}

function isUstar(h: Buffer): boolean {
  return h.subarray(257, 262).toString('latin1') === 'ustar';
}

function cString(b: Buffer): string {
  const end = b.indexOf(0);
  return b.subarray(0, end < 0 ? b.length : end).toString('utf8');
}

/** Octal, or GNU base-256 for sizes over 8 GiB. */
function parseNumber(field: Buffer): number {
  if (field[0] & 0x80) {
    let n = 0;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i];
    return n;
  }
  const s = cString(field).trim();
  return s ? parseInt(s, 8) : 0;
}

function parsePax(data: Buffer): { path?: string; linkpath?: string } {
  const out: { path?: string; linkpath?: string } = {};
  let pos = 0;
  while (pos < data.length) {
    const space = data.indexOf(0x20, pos);
    if (space < 0) break;
    const len = parseInt(data.subarray(pos, space).toString('latin1'), 10);
    if (!len) break;
    const record = data.subarray(space + 1, pos + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    const key = record.slice(0, eq);
    if (key === 'path') out.path = record.slice(eq + 1);
    if (key === 'linkpath') out.linkpath = record.slice(eq + 1);
    pos += len;
  }
  return out;
}
