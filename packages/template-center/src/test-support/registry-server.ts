import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';

export interface RegistryAuth {
  htpasswd?: { users: Record<string, string> };
  token?: { realm: string; service: string; issuer: string; rootCertBundle: string };
}

export interface TestRegistry {
  /** host:port */
  host: string;
  port: number;
  dir: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** Debian's docker-registry on a free loopback port with its own storage and config. */
export async function startRegistry(auth: RegistryAuth = {}): Promise<TestRegistry> {
  const dir = await mkdtemp(join(tmpdir(), 'tc-registry-'));
  const port = await freePort();
  const config: Record<string, unknown> = {
    version: 0.1,
    log: { level: 'error', accesslog: { disabled: true } },
    storage: { filesystem: { rootdirectory: join(dir, 'data') }, delete: { enabled: true } },
    http: { addr: `127.0.0.1:${port}`, secret: 'test-secret' },
  };
  if (auth.htpasswd) {
    const file = join(dir, 'htpasswd');
    for (const [user, pass] of Object.entries(auth.htpasswd.users)) {
      const r = spawnSync('htpasswd', ['-Bb', ...(spawnSync('test', ['-e', file]).status === 0 ? [] : ['-c']), file, user, pass], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`htpasswd: ${r.stderr}`);
    }
    config.auth = { htpasswd: { realm: 'test-realm', path: file } };
  }
  if (auth.token) {
    config.auth = { token: { realm: auth.token.realm, service: auth.token.service, issuer: auth.token.issuer, rootcertbundle: auth.token.rootCertBundle } };
  }
  const configPath = join(dir, 'config.yml');
  await writeFile(configPath, stringify(config));
  const child: ChildProcess = spawn('docker-registry', ['serve', configPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => { if (stderr.length < 4000) stderr += d; });
  const host = `127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited: ${stderr}`);
    const ok = await fetch(`http://${host}/v2/`).then((r) => r.status === 200 || r.status === 401, () => { /* not listening yet: poll again */ return false; });
    if (ok) break;
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`docker-registry did not start: ${stderr}`); }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host, port, dir,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * skopeo copy from an OCI layout into the registry (all platforms of an index). Asynchronous:
 * a token service running in this process must keep answering while skopeo runs.
 */
export function pushLayout(layoutDir: string, tag: string, dest: string, creds?: { username: string; password: string }): Promise<void> {
  const args = ['copy', '--quiet', '--all', '--dest-tls-verify=false', ...(creds ? ['--dest-creds', `${creds.username}:${creds.password}`] : []),
    `oci:${layoutDir}:${tag}`, `docker://${dest}`];
  return new Promise((resolve, reject) => {
    const child = spawn('skopeo', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`skopeo ${args.join(' ')}: ${stderr}`))));
  });
}
