import { createHash } from 'node:crypto';
import { chmodSync, chownSync, lchownSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { pathInRoot } from '../layers/safe-path.ts';
import { UnpackBudget } from '../layers/unpack-budget.ts';
import { appendLine, groupIds, parsePasswd } from './passwd.ts';
import { copySkel } from './skel-copy.ts';

export interface InjectOptions {
  /** PEM of the egress root CA to bake in, or undefined. */
  caPem?: string;
  /**
   * What the image may still take (the build's unpack budget after its layers): the copy of
   * /etc/skel into the new user's home is charged to it. Default: the entry cap alone.
   */
  budget?: UnpackBudget;
  signal?: AbortSignal;
}

export interface InjectResult {
  userCreated: boolean;
  uid: number;
  caInstalled: boolean;
}

const SVC_MOUNT_POINT = '/.svc';
const USER = 'user';
const CA_FILE = '/usr/local/share/ca-certificates/svc-egress.crt';
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

/**
 * What a template with the egress CA sets in every sandbox, so that Node, OpenSSL and Python's
 * requests trust the proxy's certificates (docs/egress.md). An image's own setting wins.
 */
export function withCaEnv(env: string[] | undefined, caPem: string): string[] {
  const out = [...(env ?? [])].filter((e) => !e.startsWith(`${CA_FINGERPRINT_ENV}=`));
  out.push(`${CA_FINGERPRINT_ENV}=${caFingerprint(caPem)}`);
  const has = (name: string) => out.some((e) => e.startsWith(`${name}=`));
  for (const [name, value] of [['NODE_EXTRA_CA_CERTS', CA_FILE], ['SSL_CERT_FILE', CA_BUNDLE], ['REQUESTS_CA_BUNDLE', CA_BUNDLE]]) {
    if (!has(name)) out.push(`${name}=${value}`);
  }
  return out;
}

/** Which CA a template holds: `svc up` builds its templates again when the egress CA changed. */
export const CA_FINGERPRINT_ENV = 'SVC_EGRESS_CA_SHA256';

export function caFingerprint(caPem: string): string {
  return createHash('sha256').update(caPem.trim()).digest('hex');
}

const DEFAULT_HOSTS = '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n';
const DEFAULT_RESOLV = 'nameserver 8.8.8.8\nnameserver 1.1.1.1\n';

/**
 * Adds what every sandbox relies on to an unpacked image: the /.svc mount point (envd and its
 * runtime are bind-mounted there at run time), a `user` account, name resolution defaults and,
 * on request, the egress root CA. Every path is resolved inside the root, so an image whose
 * /etc is a symbolic link cannot send these writes outside it. Running it again on its own
 * result changes nothing but a CA it is given (debian-build.ts relies on that). A change to what
 * it writes into Debian's trees bumps IMAGE_RECIPE_VERSION in debian-image.ts.
 */
export async function injectSandboxEssentials(root: string, opts: InjectOptions = {}): Promise<InjectResult> {
  const p = (imagePath: string) => pathInRoot(root, imagePath);
  mkdirInRoot(root, SVC_MOUNT_POINT, 0o755);
  mkdirInRoot(root, '/etc', 0o755);
  mkdirInRoot(root, '/tmp', 0o1777);

  const user = await ensureUser(root, opts);
  writeIfMissingOrEmpty(root, '/etc/hosts', DEFAULT_HOSTS);
  writeIfMissingOrEmpty(root, '/etc/resolv.conf', DEFAULT_RESOLV);

  let caInstalled = false;
  if (opts.caPem) {
    const pem = opts.caPem.endsWith('\n') ? opts.caPem : `${opts.caPem}\n`;
    mkdirInRoot(root, '/usr/local/share/ca-certificates', 0o755);
    writeRegular(p(CA_FILE), pem, 0o644);
    const bundle = p(CA_BUNDLE);
    if (isFile(bundle)) {
      const current = readFileSync(bundle, 'utf8');
      if (!current.includes(pem.trim())) writeRegular(bundle, appendLine(current.replace(/\n*$/, ''), pem.trimEnd()), 0o644);
    } else if (lstatOrNull(bundle) === null) {
      // An image without a bundle trusted nothing; now it trusts the proxy, as SSL_CERT_FILE says.
      mkdirInRoot(root, '/etc/ssl/certs', 0o755);
      writeRegular(bundle, pem, 0o644);
    }
    caInstalled = true;
  }
  return { ...user, caInstalled };
}

async function ensureUser(root: string, opts: InjectOptions): Promise<{ userCreated: boolean; uid: number }> {
  const p = (imagePath: string) => pathInRoot(root, imagePath);
  const passwdPath = p('/etc/passwd');
  const groupPath = p('/etc/group');
  let passwd = readIfFile(passwdPath) ?? 'root:x:0:0:root:/root:/bin/sh\n';
  let group = readIfFile(groupPath) ?? 'root:x:0:\n';
  const users = parsePasswd(passwd);
  const existing = users.find((u) => u.name === USER);
  if (existing) {
    if (!readIfFile(passwdPath)) writeRegular(passwdPath, passwd, 0o644);
    return { userCreated: false, uid: existing.uid };
  }
  // uid 1000 as E2B's base has, unless the image already gave it to someone else.
  const takenUids = new Set(users.map((u) => u.uid));
  const gids = groupIds(group);
  const takenGids = new Set(gids.values());
  let uid = 1000;
  while (takenUids.has(uid) || (takenGids.has(uid) && !gids.has(USER))) uid++;
  const gid = gids.get(USER) ?? uid;
  const shell = ['/bin/bash', '/usr/bin/bash'].find((s) => existsSync(p(s))) ? '/bin/bash' : '/bin/sh';

  passwd = appendLine(passwd, `${USER}:x:${uid}:${gid}::/home/${USER}:${shell}`);
  if (!gids.has(USER)) group = appendLine(group, `${USER}:x:${gid}:`);
  writeRegular(passwdPath, passwd, 0o644);
  writeRegular(groupPath, group, 0o644);
  const shadowPath = p('/etc/shadow');
  const shadow = readIfFile(shadowPath);
  if (shadow !== undefined) writeRegular(shadowPath, appendLine(shadow, `${USER}:*:19000:0:99999:7:::`), statSync(shadowPath).mode & 0o7777);
  // Passwordless sudo, as E2B's `user` has, when the image ships sudo.
  if (isDir(p('/etc/sudoers.d'))) writeRegular(p(`/etc/sudoers.d/${USER}`), `${USER} ALL=(ALL:ALL) NOPASSWD: ALL\n`, 0o440);

  mkdirInRoot(root, '/home', 0o755);
  const home = p(`/home/${USER}`);
  if (!existsSync(home)) {
    mkdirSync(home, { mode: 0o755 });
    lchownSync(home, uid, gid);
    const skel = p('/etc/skel');
    if (isDir(skel)) await copySkel(skel, home, { uid, gid, budget: opts.budget ?? new UnpackBudget(), signal: opts.signal });
  }
  return { userCreated: true, uid };
}

function mkdirInRoot(root: string, imagePath: string, mode: number) {
  const host = pathInRoot(root, imagePath);
  const st = lstatOrNull(host);
  if (st?.isDirectory()) return;
  if (st) rmSync(host, { recursive: true, force: true });
  mkdirSync(dirname(host), { recursive: true, mode: 0o755 });
  mkdirSync(host, { mode });
  // mkdir's mode goes through the umask: /tmp must be 1777, not 1755.
  chmodSync(host, mode);
  chownSync(host, 0, 0);
}

/** A dangling link (e.g. to systemd-resolved's stub file) or an empty file is no configuration. */
function writeIfMissingOrEmpty(root: string, imagePath: string, content: string) {
  const resolved = lstatOrNull(pathInRoot(root, imagePath, true));
  if (resolved?.isFile() && resolved.size > 0) return;
  const host = pathInRoot(root, imagePath, false);
  rmSync(host, { recursive: true, force: true });
  writeFileSync(host, content, { mode: 0o644 });
}

/**
 * Writes a regular file where an image may have put anything (the path is resolved inside the
 * root, so it is no link): a FIFO there blocked the template center's one thread for good, and
 * a block device node took the write, as root, onto a disk of the host. Whatever is not a
 * regular file is removed first (found by a helper reading the template center as an attacker,
 * 2026-11-30).
 */
function writeRegular(host: string, content: string, mode: number): void {
  const st = lstatOrNull(host);
  if (st && !st.isFile()) rmSync(host, { recursive: true, force: true });
  writeFileSync(host, content, { mode });
  // A new file gets the mode (past the umask); an image's own file keeps its own.
  if (!st?.isFile()) chmodSync(host, mode);
}

function readIfFile(path: string): string | undefined {
  return isFile(path) ? readFileSync(path, 'utf8') : undefined;
}
function isFile(path: string) { return lstatOrNull(path)?.isFile() ?? false; }
function isDir(path: string) { return lstatOrNull(path)?.isDirectory() ?? false; }
function lstatOrNull(path: string) { try { return lstatSync(path); } catch { return null; } }
