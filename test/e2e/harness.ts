/**
 * Brings the whole platform up with the real `svc up` (a child process, as a user runs it) on
 * ports of its own, and takes it down again, checking that no sandbox process is left behind.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { afterEach, beforeEach, type TestContext } from 'node:test';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

export const REPO = resolve(import.meta.dirname, '../..');
export const SVC_BIN = join(REPO, 'packages/cli/bin/svc.mjs');

/** The runtime the platform under test runs (`SVC_RUNTIME`, as `svc up` reads it). */
export const RUNTIME: 'gvisor' | 'microvm' = process.env.SVC_RUNTIME === 'microvm' ? 'microvm' : 'gvisor';

export interface Endpoint {
  apiUrl: string;
  apiKey: string;
  sandboxUrl: string;
  domain: string;
}

export interface RunningPlatform extends Endpoint {
  dataDir: string;
  logFile: string;
  env: NodeJS.ProcessEnv;
  /** Environment for the official e2b SDK. */
  e2bEnv: Record<string, string>;
  logLines(): string[];
  /** What `svc up` wrote to stderr so far (warnings, and the stack trace when it crashed). */
  stderrText(): string;
  stop(): Promise<void>;
}

/** Ports far from the defaults, so a developer's own `svc up` keeps running beside the tests. */
const E2E_PORTS = {
  SVC_API_LISTEN: '127.0.0.1:13000',
  SVC_MASTER_LISTEN: '127.0.0.1:18089',
  SVC_NODE_AGENT_LISTEN: '127.0.0.1:18088',
  SVC_PROXY_HTTP_PORT: '13002',
  SVC_PROXY_ADMIN_PORT: '18082',
  SVC_TEMPLATE_CENTER_LISTEN: '127.0.0.1:18090',
  SVC_LIFECYCLE_LISTEN: '127.0.0.1:18083',
  SVC_ADDRESS_POOL: '10.210.0.0/16',
  SVC_EGRESS_HTTP_PORT: '18180',
  SVC_EGRESS_HTTPS_PORT: '18443',
  SVC_EGRESS_ADMIN_PORT: '19091',
  SVC_EGRESS_TUNNEL_PORT: '18181',
  // The tests' "internet" is a veth attached to this host (test/e2e/internet): the egress proxy
  // would refuse it as an attached network, which is what the setting is for elsewhere.
  SVC_EGRESS_REFUSE_ATTACHED_NETWORKS: 'false',
};

export async function startPlatform(opts: { dataDir?: string; env?: Record<string, string> } = {}): Promise<RunningPlatform> {
  // A data dir per runtime: what one runtime's runs leave is not the other's.
  const dataDir = opts.dataDir ?? (RUNTIME === 'microvm' ? '/tmp/svc-e2e-data-microvm' : '/tmp/svc-e2e-data');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  chmodSync(dataDir, 0o700);
  // Tests make no bursts of creates: a pool that starts at 2 (not svc up's 8) leaves the CPU to them.
  // The code-interpreter-v1 template (1.5 GB) only where a test asks for it.
  const env: NodeJS.ProcessEnv = { ...process.env, ...E2E_PORTS, SVC_LIFECYCLE_WARMUP_SEC: '1', SVC_WARM_POOL_INITIAL: '2', SVC_CODE_INTERPRETER_TEMPLATE: 'false', SVC_MCP_GATEWAY_TEMPLATE: 'false', ...opts.env };
  const child = spawn(process.execPath, [SVC_BIN, 'up', '--data-dir', dataDir, '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  const endpoint = await new Promise<Endpoint>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`svc up not ready after 10 minutes\n${stderr}`)), 600_000);
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      try {
        const msg = JSON.parse(line);
        // The admin key is printed only to a terminal (a pipe here): it is in endpoint.json (0600).
        if (msg.ready) { clearTimeout(timer); res({ ...msg, apiKey: msg.apiKey ?? JSON.parse(readFileSync(msg.endpointFile, 'utf8')).apiKey }); }
      } catch { /* progress output */ }
    });
    child.on('exit', (code) => { clearTimeout(timer); rej(new Error(`svc up exited with ${code}\n${stderr}`)); });
  });
  const logFile = join(dataDir, 'svc.log');
  return {
    ...endpoint,
    dataDir,
    logFile,
    env,
    e2bEnv: { E2B_API_URL: endpoint.apiUrl, E2B_VOLUME_API_URL: endpoint.apiUrl, E2B_SANDBOX_URL: endpoint.sandboxUrl, E2B_API_KEY: endpoint.apiKey, E2B_DOMAIN: endpoint.domain },
    logLines: () => readFileSync(logFile, 'utf8').split('\n').filter(Boolean),
    stderrText: () => stderr,
    stop: () => stopPlatform(child),
  };
}

async function stopPlatform(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([exited, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), 60_000); })]);
  // A pending 60 s timer would keep the test process alive that long after every file.
  clearTimeout(timer);
  if (code === 'timeout') {
    child.kill('SIGKILL');
    throw new Error('svc up did not stop within 60 s of SIGTERM');
  }
}

/** Sandbox processes (gVisor's runsc, or QEMU for microvm) still running on this machine. */
export function sandboxProcessesAll(): string[] {
  try {
    return execFileSync('pgrep', ['-a', '-f', 'runsc|qemu-system'], { encoding: 'utf8' }).split('\n').filter((l) => l && !l.includes('pgrep'));
  } catch {
    return [];
  }
}

/**
 * The processes of one sandbox (gVisor's or QEMU): the node agent records which instance serves
 * it (<state>/instances/<instance>/record.json), and runsc's and QEMU's command lines name the
 * instance's directory. Counting every such process would count the warm pool refilling meanwhile.
 */
export function sandboxProcesses(dataDir: string, sandboxId: string): string[] {
  const instance = instanceDirs(dataDir).find((dir) => {
    try {
      return (JSON.parse(readFileSync(join(dir, 'record.json'), 'utf8')) as { sandboxId?: string }).sandboxId === sandboxId;
    } catch {
      return false; // an instance being written or torn down: not the one asked for
    }
  });
  if (!instance) return [];
  return sandboxProcessesAll().filter((l) => l.includes(`${instance}/`));
}

function instanceDirs(root: string, depth = 0): string[] {
  if (depth > 3) return [];
  const found: string[] = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const dir = join(root, entry.name);
    if (entry.name === 'instances') found.push(...readdirSync(dir).map((n) => join(dir, n)));
    else found.push(...instanceDirs(dir, depth + 1));
  }
  return found;
}

/** Applies the e2b SDK's environment for the duration of a test file. */
export function useE2bEnv(p: RunningPlatform): void {
  Object.assign(process.env, p.e2bEnv);
}

/**
 * When a test of this file fails, print the platform's warnings and errors logged while it ran
 * beside the failure, so a CI log says what the platform saw, not just what the client got.
 */
export function diagnoseFailures(platform: () => RunningPlatform | undefined): void {
  let offset = 0;
  beforeEach(() => {
    const p = platform();
    offset = p && existsSync(p.logFile) ? statSync(p.logFile).size : 0;
  });
  afterEach((ctx) => {
    // `passed` came after the types this project pins (Node 20 has it at run time).
    const t = ctx as TestContext & { passed?: boolean };
    const p = platform();
    if (t.passed !== false || !p || !existsSync(p.logFile)) return;
    const lines = readFileSync(p.logFile).subarray(offset).toString('utf8').split('\n').filter(Boolean);
    const problems = lines.flatMap((l) => {
      try {
        const { level, time: _t, pid: _p, hostname: _h, msg, component, ...rest } = JSON.parse(l) as Record<string, unknown>;
        return (level as number) >= 40 ? [`[${component}] ${msg} ${JSON.stringify(rest)}`.slice(0, 1_500)] : [];
      } catch {
        return [];
      }
    });
    t.diagnostic(`platform warnings and errors while this test ran (${problems.length}):`);
    for (const line of problems.slice(-20)) t.diagnostic(line);
  });
}

/** Polls `fn` until it gives a value (errors count as not yet); fails naming `what` after the timeout. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: Error | undefined;
  for (;;) {
    const v = await fn().catch((err: Error) => {
      last = err; // not yet: fn is asked again until the deadline, and the timeout says the last error
      return undefined;
    });
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${last.message})` : ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** An audit log's records (JSON lines), whole lines only: the writer may be halfway through the last. */
export function readJsonLines(path: string): Array<Record<string, unknown>> {
  const text = readFileSync(path, 'utf8');
  return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}
