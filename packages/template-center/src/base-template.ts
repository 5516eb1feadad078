import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { hostCommandEnv, whenMissing } from '@svc/common';

/**
 * The `base` template's root filesystem, built locally from Debian's packages with mmdebstrap
 * (these machines reach Debian's mirror but no container registry), then fed through the same
 * build pipeline as any image (as a rootfs-tar source). The tarball is cached machine-wide under
 * a key derived from everything that shapes it, so later calls return it at once.
 */
export const BASE_PACKAGES = [
  'bash', 'python3', 'curl', 'ca-certificates', 'sudo', 'procps', 'iproute2',
  // What E2B's own base template gives: git, `python` and pip with venv, Node.js and npm, and
  // enough of a toolchain for `pip install` of packages that ship no wheel.
  'git', 'python-is-python3', 'python3-pip', 'python3-venv', 'python3-dev', 'nodejs', 'npm', 'build-essential',
] as const;

/**
 * What the `code-interpreter-v1` template adds to the base: a Jupyter kernel for Python and the
 * libraries agents use for tables and charts (docs/code-interpreter.md).
 */
export const CODE_INTERPRETER_PACKAGES = ['python3-ipykernel', 'python3-numpy', 'python3-pandas', 'python3-matplotlib'] as const;

/** The root filesystems svc builds from Debian's packages, by name: each a tarball of its own. */
export const ROOTFS_FLAVORS = {
  base: [...BASE_PACKAGES],
  'code-interpreter': [...BASE_PACKAGES, ...CODE_INTERPRETER_PACKAGES],
} as const satisfies Record<string, readonly string[]>;
export type RootfsFlavor = keyof typeof ROOTFS_FLAVORS;

/** Bump when the hooks below change what the tarball contains. */
const RECIPE_VERSION = 2;

type BasePhase = 'cached' | 'preparing' | 'downloading' | 'extracting' | 'installing' | 'configuring' | 'packing' | 'done';

export interface BaseProgress {
  phase: BasePhase;
  message?: string;
  elapsedMs: number;
}

export interface BaseRootfsOptions {
  /** Which root filesystem (default base). */
  flavor?: RootfsFlavor;
  cacheDir?: string;
  rebuild?: boolean;
  onProgress?: (p: BaseProgress) => void;
  signal?: AbortSignal;
  /** Debian sources as one-line `deb` entries; default: this machine's apt configuration. */
  sources?: string[];
  /** Default: the first suite of this machine's Debian sources. */
  suite?: string;
}

export interface BaseRootfs {
  path: string;
  cached: boolean;
  sizeBytes: number;
  durationMs: number;
  packages: string[];
  key: string;
}

const DEBIAN_SOURCES = '/etc/apt/sources.list.d/debian.sources';
const building = new Map<string, Promise<BaseRootfs>>();

/**
 * Where the tarball of the current recipe lives (whether built yet or not): its name carries a
 * key of everything that shapes it, so a changed package list means another file.
 */
export function baseRootfsPath(opts: Pick<BaseRootfsOptions, 'flavor' | 'cacheDir' | 'sources' | 'suite'> = {}): { path: string; key: string; suite: string; sources: string[] } {
  const flavor = opts.flavor ?? 'base';
  const cacheDir = opts.cacheDir ?? '/var/cache/svc';
  const sources = opts.sources ?? hostDebianSources();
  const suite = opts.suite ?? /^deb\s+\S+\s+(\S+)/.exec(sources[0] ?? '')?.[1];
  if (!suite) throw new Error(`cannot tell which Debian suite to use: no sources given and none found in ${DEBIAN_SOURCES}`);
  const key = createHash('sha256').update(JSON.stringify({ packages: [...ROOTFS_FLAVORS[flavor]], suite, variant: 'minbase', arch: process.arch, recipe: RECIPE_VERSION })).digest('hex').slice(0, 16);
  return { path: join(cacheDir, `${flavor}-rootfs-${suite}-${key}.tar`), key, suite, sources };
}

export async function buildBaseRootfs(opts: BaseRootfsOptions = {}): Promise<BaseRootfs> {
  const { path, key, suite, sources } = baseRootfsPath(opts);
  const cacheDir = opts.cacheDir ?? '/var/cache/svc';
  const flavor = opts.flavor ?? 'base';
  const packages = [...ROOTFS_FLAVORS[flavor]];
  const started = Date.now();

  if (!opts.rebuild) {
    const st = await stat(path).catch(whenMissing(null));
    if (st?.isFile()) {
      opts.onProgress?.({ phase: 'cached', message: path, elapsedMs: Date.now() - started });
      return { path, cached: true, sizeBytes: st.size, durationMs: Date.now() - started, packages, key };
    }
  }
  // Two callers in one process share one mmdebstrap run.
  const inflight = building.get(path);
  if (inflight) return inflight;
  const run = (async () => {
    await mkdir(cacheDir, { recursive: true });
    const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
    try {
      await runMmdebstrap({ suite, sources, packages, format: 'tar', out: tmp, signal: opts.signal, onProgress: (phase, message) => opts.onProgress?.({ phase, message, elapsedMs: Date.now() - started }) });
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    await removeStaleTarballs(cacheDir, flavor, path);
    const sizeBytes = (await stat(path)).size;
    opts.onProgress?.({ phase: 'done', message: path, elapsedMs: Date.now() - started });
    return { path, cached: false, sizeBytes, durationMs: Date.now() - started, packages, key };
  })();
  building.set(path, run);
  try {
    return await run;
  } finally {
    building.delete(path);
  }
}

/**
 * The same root filesystem as buildBaseRootfs, made straight into the directory `dir` (which
 * must not exist yet), not packed into a tarball: what the machine-wide image of debian-image.ts
 * is made from, sparing the tarball's packing and unpacking (about 30 s for `base`).
 */
export async function makeDebianTree(dir: string, opts: Pick<BaseRootfsOptions, 'flavor' | 'onProgress' | 'signal' | 'sources' | 'suite'> = {}): Promise<void> {
  const { suite, sources } = baseRootfsPath(opts);
  const started = Date.now();
  await runMmdebstrap({
    suite, sources, packages: [...ROOTFS_FLAVORS[opts.flavor ?? 'base']], format: 'directory', out: dir, signal: opts.signal,
    onProgress: (phase, message) => opts.onProgress?.({ phase, message, elapsedMs: Date.now() - started }),
  });
}

/** One-line `deb` entries from this machine's deb822 Debian sources. */
export function hostDebianSources(file = DEBIAN_SOURCES): string[] {
  if (!existsSync(file)) return [];
  const out: string[] = [];
  for (const stanza of readFileSync(file, 'utf8').split(/\n\s*\n/)) {
    const field = (name: string) => new RegExp(`^${name}:\\s*(.+)$`, 'mi').exec(stanza)?.[1].trim().split(/\s+/) ?? [];
    if (!field('Types').includes('deb') || /^Enabled:\s*no/mi.test(stanza)) continue;
    const components = field('Components').join(' ') || 'main';
    for (const uri of field('URIs')) for (const suite of field('Suites')) out.push(`deb ${uri} ${suite} ${components}`);
  }
  return out;
}

interface MmdebstrapRun {
  suite: string;
  sources: string[];
  packages: string[];
  format: 'tar' | 'directory';
  out: string;
  signal?: AbortSignal;
  onProgress: (phase: BasePhase, message?: string) => void;
}

const PHASES: Array<[RegExp, BasePhase]> = [
  [/running apt-get update|finding correct signed-by|chroot architecture/i, 'preparing'],
  [/downloading packages/i, 'downloading'],
  [/extracting archives/i, 'extracting'],
  [/installing (essential|remaining) packages/i, 'installing'],
  [/running --customize-hook|cleaning package lists|running special hook|cleanup/i, 'configuring'],
  [/creating tarball/i, 'packing'],
];

function runMmdebstrap(r: MmdebstrapRun): Promise<void> {
  const userHook = [
    'chroot "$1" useradd --create-home --uid 1000 --user-group --shell /bin/bash user',
    'echo "user ALL=(ALL:ALL) NOPASSWD: ALL" > "$1/etc/sudoers.d/user"',
    'chmod 0440 "$1/etc/sudoers.d/user"',
    'rm -f "$1/etc/resolv.conf" "$1/etc/hostname"',
    // Every command of the SDK runs in a login shell (bash -l), and under gVisor each program
    // started costs about 25 ms: the login files ask bash for the uid instead of running id(1),
    // and root's mesg(1) runs only on a terminal, where it means something (docs/decisions.md).
    'sed -i \'s/"$(id -u)"/"${EUID:-$(id -u)}"/g\' "$1/etc/profile"',
    'sed -i \'s/^mesg n 2> \\/dev\\/null || true$/[ -t 0 ] \\&\\& mesg n 2> \\/dev\\/null || true/\' "$1/root/.profile"',
  ].join(' && ');
  const args = [
    '--variant=minbase',
    '--mode=root',
    `--format=${r.format}`,
    `--include=${r.packages.join(',')}`,
    '--aptopt=APT::Install-Recommends "false"',
    // No fsync per unpacked file: the tree only lives until it is packed into the tarball.
    '--dpkgopt=force-unsafe-io',
    // Documentation, manual pages and translations are most of a minimal system's bulk.
    '--dpkgopt=path-exclude=/usr/share/man/*',
    '--dpkgopt=path-exclude=/usr/share/doc/*',
    '--dpkgopt=path-include=/usr/share/doc/*/copyright',
    '--dpkgopt=path-exclude=/usr/share/locale/*',
    '--dpkgopt=path-include=/usr/share/locale/locale.alias',
    '--dpkgopt=path-exclude=/usr/share/info/*',
    `--customize-hook=${userHook}`,
    r.suite,
    r.out,
    ...r.sources,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn('mmdebstrap', args, { stdio: ['ignore', 'pipe', 'pipe'], signal: r.signal, env: { ...hostCommandEnv(), LC_ALL: 'C.UTF-8' } });
    const head: string[] = [];
    const tail: string[] = [];
    let phase: BasePhase | undefined;
    const onLine = (line: string) => {
      if (head.length < 5) head.push(line);
      tail.push(line);
      if (tail.length > 40) tail.shift();
      const hit = PHASES.find(([re]) => re.test(line));
      if (hit && hit[1] !== phase) {
        phase = hit[1];
        r.onProgress(phase, line.replace(/^[IWE]:\s*/, ''));
      }
    };
    createInterface({ input: child.stderr }).on('line', onLine);
    createInterface({ input: child.stdout }).on('line', onLine);
    child.on('error', (err) => reject((err as NodeJS.ErrnoException).code === 'ENOENT' ? new Error('mmdebstrap is not installed (apt-get install mmdebstrap)') : err));
    child.on('close', (code, sig) => {
      if (code === 0) return resolve();
      const errors = [...head, ...tail].filter((l) => /^E:|error|failed|unknown option/i.test(l)).slice(-5);
      reject(new Error(`mmdebstrap failed (${code ?? sig}): ${(errors.length ? errors : tail.slice(-5)).join(' | ')}`));
    });
  });
}

/** Older tarballs of the same flavor (another recipe or package list). */
async function removeStaleTarballs(dir: string, flavor: RootfsFlavor, keep: string): Promise<void> {
  const stale = new RegExp(`^${flavor}-rootfs-.*\\.tar(\\.tmp-\\d+-\\d+)?$`);
  for (const name of await readdir(dir).catch(whenMissing([] as string[]))) {
    const p = join(dir, name);
    if (p !== keep && stale.test(name)) {
      // A temp file of a concurrent run in another process is left alone unless it is old.
      const st = await stat(p).catch(whenMissing(null)); // removed by that run meanwhile
      if (st && (!name.includes('.tmp-') || Date.now() - st.mtimeMs > 3600_000)) await rm(p, { force: true });
    }
  }
}
