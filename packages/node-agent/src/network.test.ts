import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { NodeAgentClient, type NodeSandbox } from '@svc/contracts/node-agent';
import { egressAddressOf } from '@svc/common';
import type { PlatformAddresses } from '@svc/contracts/egress';
import { run } from './host/exec.ts';
import { ResourceNames } from './names.ts';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { createRequest, makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';
import { DEFAULT_GUEST_KERNEL_DIR } from './runtime/microvm/guest-assets.ts';

/**
 * An "internet" upstream: an HTTP server in a namespace this test makes, joined to the host by
 * its own veth. Nothing here leaves the machine.
 */
async function makeUpstream(suffix: string) {
  const ns = `natest-up-${suffix}`;
  const veth = `natup${suffix}`;
  // The upstream's address is fixed, so a run that died before its cleanup left a veth holding it,
  // and the kernel routes to that one first: this run's sandboxes then reach a dead namespace
  // (CI at 3cfa8c0 failed every test here so). A namespace lives on while a process is in it, so
  // its server goes first, and the host's end of its veth (which takes the pair with it) after.
  const stale = (await run('ip', ['netns', 'list'])).stdout.split('\n').map((l) => l.split(' ')[0]).filter((n) => n.startsWith('natest-up-'));
  for (const n of stale) {
    const pids = (await run('ip', ['netns', 'pids', n], { allowFail: true })).stdout.split('\n').filter(Boolean);
    if (pids.length) await run('kill', ['-9', ...pids], { allowFail: true });
    await run('ip', ['netns', 'del', n]);
  }
  const staleLinks = (await run('ip', ['-o', 'link', 'show'])).stdout.split('\n').map((l) => l.split(':')[1]?.trim().split('@')[0] ?? '').filter((l) => l.startsWith('natup'));
  for (const l of staleLinks) await run('ip', ['link', 'del', l], { allowFail: true });
  await run('ip', ['netns', 'add', ns]);
  await run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
  await run('ip', ['addr', 'add', '10.201.250.1/30', 'dev', veth]);
  await run('ip', ['link', 'set', veth, 'up']);
  await run('ip', ['-n', ns, 'addr', 'add', '10.201.250.2/30', 'dev', 'eth0']);
  await run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
  await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  // 8080 answers HTTP; 9090 holds every connection open (a long-lived outbound connection).
  const server: ChildProcess = spawn('nsenter', [`--net=/var/run/netns/${ns}`, process.execPath, '-e',
    "require('http').createServer((q,s)=>s.end('upstream-ok')).listen(8080,'0.0.0.0');"
    + "require('net').createServer((c)=>{c.resume();c.on('error',()=>{})}).listen(9090,'0.0.0.0')"], { stdio: 'ignore' });
  let answer = '';
  for (let i = 0; i < 100 && answer !== 'upstream-ok'; i++) {
    answer = await fetch('http://10.201.250.2:8080/').then((r) => r.text()).catch(() => { /* not listening yet: polled again */ return ''; });
    if (answer !== 'upstream-ok') await new Promise((r) => setTimeout(r, 50));
  }
  // Every test here measures a sandbox against this answer: without it they would all fail as policy bugs.
  if (answer !== 'upstream-ok') throw new Error(`the test upstream in ${ns} did not answer from the host in 5 s`);
  return {
    host: '10.201.250.2',
    port: 8080,
    holdPort: 9090,
    async close() {
      server.kill('SIGKILL');
      await run('ip', ['link', 'del', veth], { allowFail: true });
      await run('ip', ['netns', 'del', ns], { allowFail: true });
    },
  };
}

const QEMU_MISSING = spawnSync('qemu-system-x86_64', ['--version']).status !== 0 || !existsSync(join(DEFAULT_GUEST_KERNEL_DIR, 'vmlinuz'));

// The same policy on both runtimes: a microvm guest's traffic leaves through its namespace's
// translation to the sandbox's address, and meets the same host-side rules (docs/runtimes.md).
for (const [runtime, pool] of [['gvisor', '10.201.3.0/24'], ['microvm', '10.201.13.0/24']] as const) {
  describe(`node agent networking (${runtime})`, { skip: runtime === 'microvm' && QEMU_MISSING ? 'qemu-system-x86_64 or the guest kernel is missing (scripts/setup.sh)' : false }, () => {
    let env: TestEnv;
    let agent: NodeAgent;
    let client: NodeAgentClient;
    let upstream: Awaited<ReturnType<typeof makeUpstream>>;
    let hostServer: http.Server;
    let hostPort: number;
    // The master's list of the platform's addresses, as this node reads it.
    let platformNow: PlatformAddresses = { endpoints: [], pools: [] };
    // Four guests booting at once under TCG take longer than gVisor's 30 s (as in microvm-sandboxes.test.ts).
    const sandboxRequest = (over: Parameters<typeof createRequest>[1] = {}) =>
      createRequest(env, { ...(runtime === 'microvm' ? { timeoutMs: 120_000 } : {}), ...over });

    before(async () => {
      env = await makeTestEnv(runtime === 'gvisor' ? 'net' : 'netmv', pool);
      upstream = await makeUpstream(Math.random().toString(36).slice(2, 6));
      hostServer = http.createServer((_q, s) => s.end('host-ok'));
      await new Promise<void>((r) => hostServer.listen(0, '0.0.0.0', r));
      hostPort = (hostServer.address() as { port: number }).port;
      agent = await startNodeAgent(env.config({ runtime }), { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000, platformAddresses: async () => platformNow });
      client = new NodeAgentClient(agent.url);
    });

    after(async () => {
      await agent?.close({ destroySandboxes: true });
      await upstream?.close();
      hostServer?.closeAllConnections();
      hostServer?.close();
      await env?.cleanup();
    });

    /** The HTTP answer a sandbox gets from host:port (busybox nc, 1 s timeout); '' when blocked. */
    const fetchFrom = async (sb: NodeSandbox, host: string, port: number) =>
      (await agent.exec(sb.sandboxId, ['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 1 ${host} ${port}`])).stdout;

    it('enforces allowInternetAccess, allowOut and denyOut; isolates sandboxes from each other and from the host', async () => {
      const [closed, open, allowed, denied] = await Promise.all([
        client.createSandbox(sandboxRequest({ allowInternetAccess: false })),
        client.createSandbox(sandboxRequest({ allowInternetAccess: true })),
        client.createSandbox(sandboxRequest({ allowInternetAccess: false, network: { allowOut: ['10.201.250.2'], denyOut: [] } })),
        client.createSandbox(sandboxRequest({ allowInternetAccess: true, network: { allowOut: [], denyOut: ['10.201.250.0/30'] } })),
      ]);
      const hostSide = agent.inspect(open.sandboxId).address.replace(/\.2$/, '.1');
      const [viaClosed, viaOpen, viaAllowed, viaDenied, toSandbox, toHost, controlOpen] = await Promise.all([
        fetchFrom(closed, upstream.host, upstream.port),
        fetchFrom(open, upstream.host, upstream.port),
        fetchFrom(allowed, upstream.host, upstream.port),
        fetchFrom(denied, upstream.host, upstream.port),
        fetchFrom(open, closed.address, 49983),
        fetchFrom(open, hostSide, hostPort),
        fetchFrom(open, '127.0.0.1', 49983),
      ]);
      assert.doesNotMatch(viaClosed, /upstream-ok/, 'allowInternetAccess=false reached the upstream');
      assert.match(viaOpen, /upstream-ok/, 'allowInternetAccess=true did not reach the upstream');
      assert.match(viaAllowed, /upstream-ok/, 'allowOut did not open the upstream');
      assert.doesNotMatch(viaDenied, /upstream-ok/, 'denyOut did not block the upstream');
      assert.doesNotMatch(toSandbox, /HTTP\/1\.1/, 'a sandbox reached another sandbox');
      assert.doesNotMatch(toHost, /host-ok/, 'a sandbox reached a host service');
      assert.match(controlOpen, /HTTP\/1\.1 /, 'the probe itself does not work');

      // The host reaches user ports at the sandbox address.
      await agent.exec(open.sandboxId, ['sh', '-c', 'mkdir -p /www && echo user-port-ok > /www/index.html']);
      await agent.exec(open.sandboxId, ['httpd', '-p', '8000', '-h', '/www']);
      let body = '';
      for (let i = 0; i < 40 && !body; i++) {
        body = await fetch(`http://${open.address}:8000/`).then((r) => r.text()).catch(() => { /* not listening yet: polled again */ return ''; });
        if (!body) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(body.trim(), 'user-port-ok');

      await Promise.all([closed, open, allowed, denied].map((s) => client.deleteSandbox(s.sandboxId)));
    });

    it('link-local (cloud metadata) stays closed when allowOut names it: its drop comes before every allow', async () => {
      const sb = await client.createSandbox(sandboxRequest({ allowInternetAccess: false, network: { allowOut: ['169.254.169.254/32', '169.254.0.0/16', upstream.host], denyOut: [] } }));
      try {
        const tag = new ResourceNames(env.config().node_agent.state_dir).tag;
        const chain = (await run('nft', ['list', 'chain', 'ip', `svc_${tag}`, `sb_${agent.inspect(sb.sandboxId).instanceId}`])).stdout;
        const linkLocalDrop = chain.search(/ip daddr 169\.254\.0\.0\/16 drop/);
        const firstAccept = chain.search(/ip daddr [0-9./]+ accept/);
        assert.ok(linkLocalDrop >= 0 && firstAccept > linkLocalDrop, chain);
        assert.match(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'the rest of allowOut still opens');
      } finally {
        await client.deleteSandbox(sb.sandboxId);
      }
    });

    it('drops a sandbox\'s packets to the platform\'s addresses on other hosts, by address and port, before any allowOut; a new list applies at once', { skip: runtime === 'microvm' ? 'the host-side chain is the same code on both runtimes (the link-local test shows a guest meets it)' : false }, async () => {
      // The upstream's namespace stands for another host of the cluster: a master or a node agent there.
      const setList = async (list: PlatformAddresses) => { platformNow = list; await agent.refreshPlatformAddresses(); };
      const sb = await client.createSandbox(sandboxRequest({ allowInternetAccess: true, network: { allowOut: [upstream.host], denyOut: [] } }));
      try {
        assert.match(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'reachable before the list names it');
        await setList({ endpoints: [{ ip: upstream.host, port: upstream.holdPort }], pools: [] });
        assert.match(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'another port of a platform host is not the platform\'s');
        await setList({ endpoints: [{ ip: upstream.host, port: upstream.port }], pools: [] });
        assert.equal(await fetchFrom(sb, upstream.host, upstream.port), '', 'a platform endpoint stayed reachable (allowOut names its host)');
        const tag = new ResourceNames(env.config().node_agent.state_dir).tag;
        const chain = (await run('nft', ['list', 'chain', 'ip', `svc_${tag}`, `sb_${agent.inspect(sb.sandboxId).instanceId}`])).stdout;
        const platformDrop = chain.search(/ip daddr \. tcp dport @platform_tcp drop/);
        assert.ok(platformDrop >= 0 && chain.search(/ip daddr [0-9./]+ accept/) > platformDrop, chain);

        // Another node's sandbox pool, on every port; a sandbox created after the list gets it too.
        await setList({ endpoints: [], pools: ['10.201.250.0/30'] });
        const later = await client.createSandbox(sandboxRequest({ allowInternetAccess: true }));
        try {
          assert.equal(await fetchFrom(later, upstream.host, upstream.port), '', 'a pool on the list stayed reachable');
          assert.equal(await fetchFrom(sb, upstream.host, upstream.port), '');
          await setList({ endpoints: [], pools: [] });
          assert.match(await fetchFrom(later, upstream.host, upstream.port), /upstream-ok/, 'the list taken away opens it again');
        } finally {
          await client.deleteSandbox(later.sandboxId);
        }
      } finally {
        platformNow = { endpoints: [], pools: [] };
        await agent.refreshPlatformAddresses();
        await client.deleteSandbox(sb.sandboxId);
      }
    });

    it('updateNetwork replaces a running sandbox\'s policy at once, and refuses a paused sandbox', async () => {
      const sb = await client.createSandbox(sandboxRequest({ allowInternetAccess: true }));
      try {
        assert.match(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/);
        await client.updateNetwork(sb.sandboxId, { allowInternetAccess: true, network: { allowOut: [], denyOut: [`${upstream.host}/32`] } });
        assert.doesNotMatch(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'denyOut took effect');
        await client.updateNetwork(sb.sandboxId, { allowInternetAccess: false, network: { allowOut: [upstream.host], denyOut: [] } });
        assert.match(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'allowOut opened the one address');
        await client.updateNetwork(sb.sandboxId, { allowInternetAccess: false, network: { allowOut: [], denyOut: [] } });
        assert.doesNotMatch(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'the update replaced the whole policy');
        await assert.rejects(client.updateNetwork(sb.sandboxId, { allowInternetAccess: true, network: { allowOut: ['not an address!'], denyOut: [] } }),
          (e: { status?: number }) => e.status === 400);
        await client.pauseSandbox(sb.sandboxId);
        await assert.rejects(client.updateNetwork(sb.sandboxId, { allowInternetAccess: true, network: { allowOut: [], denyOut: [] } }),
          (e: { status?: number }) => e.status === 409);
        await assert.rejects(client.updateNetwork('inosuchsandbox0000000', { allowInternetAccess: true, network: { allowOut: [], denyOut: [] } }),
          (e: { status?: number }) => e.status === 404);
      } finally {
        await client.deleteSandbox(sb.sandboxId);
      }
    });

    it('a pause drops the connections the sandbox opened (docs/runtimes.md, the pause paragraph); new ones work after the resume', async () => {
      const sb = await client.createSandbox(sandboxRequest({ timeoutMs: 120_000 }));
      const ncExit = async () => (await agent.exec(sb.sandboxId, ['sh', '-c', 'cat /tmp/nc.exit 2>/dev/null || echo running'])).stdout.trim();
      try {
        await agent.exec(sb.sandboxId, ['sh', '-c', `(while true; do echo ping; sleep 0.3; done) | nc ${upstream.host} ${upstream.holdPort} >/dev/null 2>&1; echo $? > /tmp/nc.exit`], { detach: true });
        await new Promise((r) => setTimeout(r, 1_500));
        assert.equal(await ncExit(), 'running', 'the connection is up before the pause');
        await client.pauseSandbox(sb.sandboxId);
        await client.resumeSandbox(sb.sandboxId);
        const deadline = Date.now() + 15_000;
        while (await ncExit() === 'running' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 300));
        assert.notEqual(await ncExit(), 'running', 'the connection opened before the pause went on after the resume');
        assert.match(await fetchFrom(sb, upstream.host, upstream.port), /upstream-ok/, 'a new connection works');
      } finally {
        await client.deleteSandbox(sb.sandboxId);
      }
    });

    it('steers a sandbox\'s rule ports to the egress proxy\'s listeners, from its own address only; other ports follow layer 3', async () => {
      const address = egressAddressOf(pool);
      // A stand-in for the proxy on its listeners: it answers with the address it saw the request from.
      const stand = (scheme: string) => http.createServer((q, s) => s.end(`proxy-${scheme} from ${q.socket.remoteAddress}`));
      const proxies = [stand('http'), stand('https')];
      await new Promise<void>((r) => proxies[0].listen(env.egressPorts.http, address, r));
      await new Promise<void>((r) => proxies[1].listen(env.egressPorts.https, address, r));
      const sb = await client.createSandbox(sandboxRequest({
        allowInternetAccess: false,
        network: { allowOut: [], denyOut: [], steer: [{ port: 8080, scheme: 'https' }, { port: 80, scheme: 'http' }] },
      }));
      try {
        // 8080 is a rule port: it lands on the proxy's HTTPS listener, whatever the address asked for.
        assert.match(await fetchFrom(sb, upstream.host, 8080), new RegExp(`proxy-https from ${sb.address.replace(/\./g, '\\.')}`));
        assert.match(await fetchFrom(sb, '192.0.2.1', 80), /proxy-http from/);
        // 8081 is not: layer 3 decides, and this sandbox may not go out.
        assert.equal(await fetchFrom(sb, upstream.host, 8081), '');
        // The update that drops the rules takes the steering away at once.
        await client.updateNetwork(sb.sandboxId, { allowInternetAccess: true, network: { allowOut: [], denyOut: [] } });
        assert.match(await fetchFrom(sb, upstream.host, 8080), /upstream-ok/);
        await assert.rejects(client.updateNetwork(sb.sandboxId, {
          allowInternetAccess: true, network: { allowOut: [], denyOut: [], steer: [{ port: 8080, scheme: 'https' }, { port: 8080, scheme: 'http' }] },
        }), (e: { status?: number; message?: string }) => e.status === 400 && /both http and https/.test(e.message ?? ''));
      } finally {
        await client.deleteSandbox(sb.sandboxId);
        for (const p of proxies) p.close();
      }
    });

    it('passes over pool addresses the host already uses (another agent, a bridge) instead of hanging on them', { skip: runtime === 'microvm' ? 'the address pool is the same code on both runtimes' : false }, async () => {
      const foreign = `natcl${Math.random().toString(36).slice(2, 6)}`;
      await run('ip', ['link', 'add', foreign, 'type', 'veth', 'peer', 'name', `${foreign}p`]);
      try {
        await run('ip', ['addr', 'add', '10.201.3.1/30', 'dev', foreign]);
        await run('ip', ['addr', 'add', '10.201.3.6/30', 'dev', foreign]);
        await run('ip', ['link', 'set', foreign, 'up']);
        const sb = await client.createSandbox(sandboxRequest());
        // Next-fit (address-pool.ts): where the search starts depends on the tests before; the
        // first two /30s of the pool, which clash with the foreign interface, are never given.
        const last = Number(sb.address.split('.')[3]);
        assert.ok(sb.address.startsWith('10.201.3.') && last >= 8, `${sb.address}: the first two /30s of the pool clash with the foreign interface`);
        await client.deleteSandbox(sb.sandboxId);
      } finally {
        await run('ip', ['link', 'del', foreign], { allowFail: true });
      }
    });
  });
}
