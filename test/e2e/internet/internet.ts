/**
 * A stand-in for the internet: a network namespace of the test's own, joined to the host by a
 * veth pair, with upstream servers (upstream.mjs) at INTERNET_ADDRESS. Nothing leaves the host.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { EgressCa } from '@svc/egress';

const NETNS = 'svc-e2e-inet';
const HOST_VETH = 'svce2einet0';
export const INTERNET_ADDRESS = '10.203.0.2';
/** A second address of the same servers that no test name resolves to. */
export const OTHER_ADDRESS = '10.203.0.3';
const HOST_ADDRESS = '10.203.0.1';

export interface UpstreamEvent {
  event: 'request' | 'connection' | 'ready';
  scheme?: string;
  method?: string;
  path?: string;
  host?: string;
  headers?: Record<string, string>;
  /** The address the request came from: a proxy's, or the host's (its masquerade) when direct. */
  remote?: string;
}

export interface Internet {
  /** The CA the upstream certificates chain to: what the egress proxy must trust for upstreams. */
  caFile: string;
  events: UpstreamEvent[];
  requests(): UpstreamEvent[];
  connections(): number;
  close(): Promise<void>;
}

const ip = (args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] });

/** names: the host names the upstream answers for (one certificate each, and one for the address). */
export async function startInternet(names: string[]): Promise<Internet> {
  teardown();
  ip(['netns', 'add', NETNS]);
  ip(['link', 'add', HOST_VETH, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NETNS]);
  ip(['addr', 'add', `${HOST_ADDRESS}/24`, 'dev', HOST_VETH]);
  ip(['link', 'set', HOST_VETH, 'up']);
  ip(['-n', NETNS, 'addr', 'add', `${INTERNET_ADDRESS}/24`, 'dev', 'eth0']);
  ip(['-n', NETNS, 'addr', 'add', `${OTHER_ADDRESS}/24`, 'dev', 'eth0']);
  ip(['-n', NETNS, 'link', 'set', 'eth0', 'up']);
  ip(['-n', NETNS, 'link', 'set', 'lo', 'up']);
  // Replies to sandboxes (whose traffic the host masquerades) go back through the host.
  ip(['-n', NETNS, 'route', 'add', 'default', 'via', HOST_ADDRESS]);

  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-inet-'));
  const ca = await EgressCa.loadOrCreate(join(dir, 'ca'));
  const certs: Record<string, { cert: string; key: string }> = {};
  for (const name of [...names, INTERNET_ADDRESS]) certs[name] = await ca.leafFor(name);
  writeFileSync(join(dir, 'conf.json'), JSON.stringify({ certs, defaultName: INTERNET_ADDRESS }));
  const caFile = join(dir, 'ca', 'ca.pem');

  const child: ChildProcess = spawn('ip', ['netns', 'exec', NETNS, process.execPath, join(import.meta.dirname, 'upstream.mjs'), join(dir, 'conf.json')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const events: UpstreamEvent[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the upstream servers did not start within 10 s')), 10_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const e = JSON.parse(line) as UpstreamEvent;
      events.push(e);
      if (e.event === 'ready') { clearTimeout(timer); resolve(); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`the upstream servers exited with ${code}`)); });
  });
  return {
    caFile,
    events,
    requests: () => events.filter((e) => e.event === 'request'),
    connections: () => events.filter((e) => e.event === 'connection').length,
    async close() {
      child.kill('SIGTERM');
      teardown();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function teardown() {
  try { ip(['link', 'del', HOST_VETH]); } catch { /* not there: nothing to remove */ }
  try { ip(['netns', 'del', NETNS]); } catch { /* not there: nothing to remove */ }
}
