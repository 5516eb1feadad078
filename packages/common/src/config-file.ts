/**
 * Reading the configuration file. It names what root runs (volume_plugins[].binary_path,
 * node_agent.qemu_binary) and holds the platform's secrets, so when svc runs as root a file
 * another user may change is refused: whoever could write it would run their program as root at
 * the next start. A file others may read is accepted, with a warning when it holds secrets. Its
 * owner may be root or whoever owns svc's own program (`sudo svc up --config ./svc.yaml` from a
 * user's checkout): that user already decides what root runs.
 */
import { closeSync, fstatSync, openSync, readFileSync, statSync } from 'node:fs';
import { ConfigError } from './config-error.ts';

/** The file's text; a ConfigError when root would trust a file another user may change. */
export function readConfigFile(file: string, uid = process.getuid?.(), trusted = trustedOwners()): { text: string; othersRead: boolean } {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw new ConfigError('config file', `${file} cannot be read: ${(err as Error).message}`);
  }
  try {
    // The descriptor's: what is checked is what is read, however the name is swapped meanwhile.
    const st = fstatSync(fd);
    if (uid === 0) {
      if (!trusted.has(st.uid)) throw new ConfigError('config file', `${file} belongs to uid ${st.uid}, and svc runs as root: whoever owns it could make root run any program (volume_plugins, node_agent.qemu_binary). chown root it`);
      if (st.mode & 0o022) throw new ConfigError('config file', `${file} may be changed by other users (mode 0${(st.mode & 0o777).toString(8)}), and svc runs as root: they could make root run any program (volume_plugins, node_agent.qemu_binary). chmod go-w it`);
    }
    return { text: readFileSync(fd, 'utf8'), othersRead: (st.mode & 0o004) !== 0 };
  } finally {
    closeSync(fd);
  }
}

/**
 * The owners root may trust with what it runs: root, and the owner of the program running (the
 * bundle or the checkout's entry file), who could change that program anyway.
 */
export function trustedOwners(entry = process.argv[1]): Set<number> {
  const owners = new Set([0]);
  try {
    if (entry) owners.add(statSync(entry).uid);
  } catch {
    // No entry file to ask (node -e, a REPL): root alone.
  }
  return owners;
}

/** Keys whose value is a secret: tokens, passwords, keys (not the files that hold them). */
const SECRET_KEY = /token|password|secret|(^|_)key$|api_keys$/;

/** The dotted names of the secrets the parsed file sets, for the warning. */
export function secretsIn(doc: unknown, prefix = ''): string[] {
  if (doc === null || typeof doc !== 'object') return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (typeof v === 'object') out.push(...secretsIn(v, key));
    else if (SECRET_KEY.test(k) && (typeof v === 'number' || (typeof v === 'string' && v !== ''))) out.push(key);
  }
  return out;
}
