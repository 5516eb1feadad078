/** Test helpers: temporary directories, and the mounts a test left under one. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `svc-volumes-${prefix}-`));
}

/** Mount points at or under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
  const unescape = (f: string) => f.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((m): m is string => m !== undefined)
    .map(unescape)
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/** Detaches every mount under `dir` and deletes it. */
export function removeTempDir(dir: string): void {
  for (const m of mountsUnder(dir)) execFileSync('umount', ['-l', m]);
  rmSync(dir, { recursive: true, force: true });
}

/** Processes of a process group that are still alive (zombies waiting to be reaped do not count). */
export function livingInGroup(pgid: number): number[] {
  const living: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // it ended while the list was read
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing parenthesis
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') living.push(Number(entry));
  }
  return living;
}
