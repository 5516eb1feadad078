/**
 * Auto-pause on idle, auto-resume on the next plain HTTP request, kill on timeout (410 on user ports),
 * private sandboxes behind a traffic token, WebSockets and streaming through the data plane.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, request } from 'node:http';
import WebSocket from 'ws';
import { Sandbox } from 'e2b';
import { startPlatform, useE2bEnv, diagnoseFailures, waitFor, type RunningPlatform } from './harness.ts';
import { startPrometheus } from './prometheus.ts';

let p: RunningPlatform;
diagnoseFailures(() => p);
before(async () => {
  p = await startPlatform();
  useE2bEnv(p);
});
after(async () => { await p?.stop(); });



async function state(id: string): Promise<{ status: number; state?: string }> {
  const res = await fetch(`${p.apiUrl}/sandboxes/${id}`, { headers: { 'X-API-Key': p.apiKey } });
  const body = await res.json() as { state?: string };
  return { status: res.status, state: body.state };
}

/** A plain HTTP request as a browser makes it: only a Host header names the sandbox. */
function get(host: string, path = '/', headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const u = new URL(p.sandboxUrl);
  return new Promise((res, rej) => {
    const req = request({ host: u.hostname, port: u.port, path, headers: { Host: host, ...headers } }, (r) => {
      let body = '';
      r.on('data', (d) => { body += d; });
      r.on('end', () => res({ status: r.statusCode!, body, headers: r.headers }));
    });
    req.on('error', rej);
    req.end();
  });
}

async function startHttpServer(sbx: Sandbox, port: number): Promise<void> {
  await sbx.files.write('/home/user/www/index.html', '<h1>hello from the sandbox</h1>');
  await sbx.commands.run(`nohup python3 -m http.server ${port} --directory /home/user/www >/dev/null 2>&1 &`);
  await waitFor('the HTTP server', async () => ((await get(sbx.getHost(port))).status === 200 ? true : undefined));
}

test('onTimeout pause + autoResume: idles into pause, a plain HTTP request wakes it, state intact', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
  try {
    await startHttpServer(sbx, 8000);
    await sbx.commands.run('nohup sh -c "sleep 100000" >/dev/null 2>&1 &');
    await waitFor('the auto-pause', async () => ((await state(sbx.sandboxId)).state === 'paused' ? true : undefined), 30_000);
    const page = await get(sbx.getHost(8000));
    assert.equal(page.status, 200);
    assert.match(page.body, /hello from the sandbox/);
    assert.equal((await state(sbx.sandboxId)).state, 'running');
    const ps = await sbx.commands.run('ps -eo args');
    assert.match(ps.stdout, /sleep 100000/, 'processes survive pause and auto-resume');
    assert.match(ps.stdout, /http\.server/);
    const lines = p.logLines();
    assert.ok(lines.some((l) => l.includes('auto-paused sandbox') && l.includes(sbx.sandboxId)));
    assert.ok(lines.some((l) => l.includes('auto-resumed sandbox') && l.includes(sbx.sandboxId)));
  } finally {
    await sbx.kill();
  }
});

test('idle means silence: a background command whose stream stays open does not keep the sandbox awake', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 8_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
  try {
    await sbx.files.write('/home/user/www/index.html', 'still serving');
    // The SDK keeps this command's stream open for as long as the client lives.
    await sbx.commands.run('cd /home/user/www && exec python3 -m http.server 8000', { background: true, timeoutMs: 0 });
    await waitFor('the HTTP server', async () => ((await get(sbx.getHost(8000))).status === 200 ? true : undefined));
    const lastTraffic = Date.now();
    await waitFor('the auto-pause', async () => ((await state(sbx.sandboxId)).state === 'paused' ? true : undefined), 30_000);
    const pausedAfter = Date.now() - lastTraffic;
    // The timeout, plus the proxy's report (1 s), a sweep (1 s) and the pause itself.
    assert.ok(pausedAfter < 8_000 + 5_000, `paused ${pausedAfter} ms after the last byte`);
    const page = await get(sbx.getHost(8000));
    assert.equal(page.status, 200);
    assert.match(page.body, /still serving/);
    assert.equal((await state(sbx.sandboxId)).state, 'running');
  } finally {
    await sbx.kill();
  }
});

test('onTimeout kill: the sandbox is reclaimed; its ports answer 410, envd 502 (the SDK: not running), REST 404', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 3_000 });
  await startHttpServer(sbx, 8001);
  await waitFor('the timeout kill', async () => ((await state(sbx.sandboxId)).status === 404 ? true : undefined), 30_000);
  const r = await get(sbx.getHost(8001));
  assert.equal(r.status, 410);
  assert.match(r.body, /timed out/);
  assert.equal(await sbx.isRunning(), false);
  // What the official SDK makes of envd's 502, as against E2B: a stream start is "not running
  // anymore", a plain call a TimeoutError.
  await assert.rejects(sbx.commands.run('true'), (e: Error) => e.name === 'SandboxNotFoundError' && /not running/.test(e.message));
  await assert.rejects(sbx.files.read('/etc/hostname'), (e: Error) => e.name === 'TimeoutError' && /timed out and was killed/.test(e.message));
  await assert.rejects(Sandbox.connect(sbx.sandboxId), (e: Error) => e.name === 'SandboxNotFoundError');
  await assert.rejects(sbx.getInfo(), (e: Error) => e.name === 'SandboxNotFoundError');
  assert.ok(p.logLines().some((l) => l.includes('timeout-killed sandbox') && l.includes(sbx.sandboxId)));
});

test('idle means a service answered: a sandbox polled every second on a closed port still times out, then answers 410', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 4_000 });
  const started = Date.now();
  let polls = 0;
  let killedAfterMs: number | undefined;
  // A health checker of a port where nothing listens: the proxy answers 502 by itself each time.
  while (Date.now() - started < 30_000) {
    const r = await get(sbx.getHost(8000), '/health');
    polls++;
    if (r.status === 410) { killedAfterMs = Date.now() - started; break; }
    assert.equal(r.status, 502, `poll ${polls}: ${r.status} ${JSON.stringify(r.headers)} ${r.body}`);
    await new Promise((res) => setTimeout(res, 1_000));
  }
  assert.ok(killedAfterMs !== undefined, `still not killed after ${polls} polls of a closed port`);
  // Its 4 s timeout plus one lifecycle sweep (1 s here); the rest is the kill itself and the
  // second between polls, with room for a loaded CI machine. Counted as activity, it never ends.
  assert.ok(killedAfterMs <= 4_000 + 1_000 + 3_000, `killed after ${killedAfterMs} ms`);
  // The proxy answers 410 from the moment the kill starts (the route says killing); the REST
  // API forgets the sandbox when its node has removed it, a moment later.
  await waitFor('the REST 404', async () => ((await state(sbx.sandboxId)).status === 404 ? true : undefined), 10_000);
});

test('a paused sandbox without autoResume stays paused and says so', async () => {
  const sbx = await Sandbox.create('base', { timeoutMs: 300_000 });
  try {
    await startHttpServer(sbx, 8002);
    await sbx.pause();
    const r = await get(sbx.getHost(8002));
    assert.equal(r.status, 409);
    assert.match(r.body, /paused/);
    assert.equal(await sbx.isRunning(), false, 'envd\'s port answers 502: not running');
    assert.equal((await state(sbx.sandboxId)).state, 'paused');
  } finally {
    await Sandbox.kill(sbx.sandboxId);
  }
});

test('allow_public_traffic=false: requests need the traffic token', async () => {
  const sbx = await Sandbox.create('base', { network: { allowPublicTraffic: false } });
  try {
    assert.match(sbx.trafficAccessToken ?? '', /^[0-9a-f-]{36}$/);
    await sbx.files.write('/home/user/www/index.html', 'private');
    await sbx.commands.run('nohup python3 -m http.server 8003 --directory /home/user/www >/dev/null 2>&1 &');
    const host = sbx.getHost(8003);
    const withToken = () => get(host, '/', { 'svc-traffic-access-token': sbx.trafficAccessToken! });
    await waitFor('the private server', async () => ((await withToken()).status === 200 ? true : undefined));
    assert.equal((await get(host)).status, 403);
    assert.equal((await get(host, '/', { 'ext-traffic-access-token': 'wrong' })).status, 403);
    assert.equal((await get(host, '/', { 'ext-traffic-access-token': sbx.trafficAccessToken! })).status, 200);
    assert.equal((await withToken()).body, 'private');
    const log = p.logLines().join('\n');
    assert.ok(!log.includes(sbx.trafficAccessToken!), 'the token never appears in a log');
  } finally {
    await sbx.kill();
  }
});

test('maskRequestHost: the sandbox\'s servers see the Host it names, ${PORT} made the port', async () => {
  const sbx = await Sandbox.create('base', { network: { maskRequestHost: 'custom-host.example.com:${PORT}' } });
  try {
    await sbx.files.write('/home/user/host.py', [
      'import http.server',
      'class H(http.server.BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        body = self.headers.get("Host", "").encode()',
      '        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)',
      '    def log_message(self, *a): pass',
      'http.server.HTTPServer(("", 8004), H).serve_forever()',
    ].join('\n'));
    await sbx.commands.run('python3 /home/user/host.py', { background: true });
    const seen = await waitFor('the Host echo', async () => {
      const r = await get(sbx.getHost(8004)).catch(() => { /* the server is not up yet: poll again */ return undefined; });
      return r?.status === 200 ? r.body : undefined;
    });
    assert.equal(seen, 'custom-host.example.com:8004');
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).network?.maskRequestHost, 'custom-host.example.com:${PORT}');
  } finally {
    await sbx.kill();
  }
});

test('a WebSocket echo and a long streaming response pass through unbuffered', async () => {
  const sbx = await Sandbox.create('base');
  try {
    await sbx.files.write('/home/user/srv.py', `
import asyncio, base64, hashlib
async def handle(reader, writer):
    head = (await reader.readuntil(b"\\r\\n\\r\\n")).decode()
    path = head.split(" ")[1]
    if path == "/stream":
        writer.write(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\nContent-Type: text/plain\\r\\n\\r\\n")
        for i in range(5):
            chunk = f"tick {i}\\n".encode()
            writer.write(f"{len(chunk):x}\\r\\n".encode() + chunk + b"\\r\\n")
            await writer.drain()
            await asyncio.sleep(0.4)
        writer.write(b"0\\r\\n\\r\\n"); await writer.drain(); writer.close(); return
    key = [l.split(": ")[1] for l in head.split("\\r\\n") if l.lower().startswith("sec-websocket-key")][0]
    acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    writer.write(f"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: {acc}\\r\\n\\r\\n".encode())
    while True:
        h = await reader.readexactly(2)
        n = h[1] & 127
        if n == 126: n = int.from_bytes(await reader.readexactly(2), "big")
        mask = await reader.readexactly(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(n)))
        if h[0] & 15 == 8: writer.close(); return
        writer.write(bytes([0x81, len(data)]) + data); await writer.drain()
async def main():
    await (await asyncio.start_server(handle, "0.0.0.0", 8004)).serve_forever()
asyncio.run(main())
`);
    await sbx.commands.run('nohup python3 /home/user/srv.py >/tmp/srv.log 2>&1 &');
    const u = new URL(p.sandboxUrl);
    const host = sbx.getHost(8004);
    await waitFor('the stream server', async () => ((await get(host, '/stream')).status === 200 ? true : undefined));

    const arrivals: number[] = [];
    const t0 = Date.now();
    await new Promise<void>((res, rej) => {
      const req = request({ host: u.hostname, port: u.port, path: '/stream', headers: { Host: host } }, (r) => {
        r.on('data', () => arrivals.push(Date.now() - t0));
        r.on('end', res);
      });
      req.on('error', rej);
      req.end();
    });
    assert.ok(arrivals.length >= 3, `chunks arrived one by one (${arrivals.length} reads)`);
    assert.ok(arrivals[0] < 1000 && arrivals.at(-1)! - arrivals[0] > 1000, `first chunk early, last late: ${arrivals.join(',')}`);

    const ws = new WebSocket(`ws://${u.host}/`, { headers: { Host: host } });
    await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
    const echo = new Promise<string>((res) => ws.once('message', (m) => res(String(m))));
    ws.send('ping through the proxy');
    assert.equal(await echo, 'ping through the proxy');
    ws.close();
  } finally {
    await sbx.kill();
  }
});

test('lifecycle events: the official SDK\'s create, setTimeout, pause, connect and an idle kill are listed and delivered to a signed webhook (docs/observability.md)', async () => {
  const received: Array<{ headers: Record<string, string | string[] | undefined>; body: string; at: number }> = [];
  const receiver = createServer((q, s) => {
    let body = '';
    q.on('data', (c) => { body += c; });
    q.on('end', () => { received.push({ headers: q.headers, body, at: Date.now() }); s.end(); });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${p.apiUrl}${path}`, { method, headers: { 'X-API-Key': p.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const text = await res.text();
    return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
  };
  const secret = 'e2e-webhook-secret';
  const hook = await api('POST', '/events/webhooks', {
    name: 'e2e', url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`, signatureSecret: secret,
    events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.updated', 'sandbox.lifecycle.paused', 'sandbox.lifecycle.resumed', 'sandbox.lifecycle.killed'],
  });
  try {
    assert.equal(hook.status, 201, hook.text);
    assert.ok(!hook.text.includes(secret), 'the secret is never answered');
    // The platform's own API port is no target (a webhook is no way to call the platform as itself).
    assert.equal((await api('POST', '/events/webhooks', { name: 'self', url: `${p.apiUrl}/sandboxes`, events: ['sandbox.lifecycle.created'], signatureSecret: 's' })).status, 400);

    const sbx = await Sandbox.create({ timeoutMs: 60_000, metadata: { purpose: 'events-e2e' } });
    await sbx.setTimeout(5_000);
    await sbx.pause();
    const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 5_000 });
    // Left alone, the idle timeout kills it: the sweep's change is an event like any other.
    const types = (list: Array<{ type: string }>) => list.map((e) => e.type.replace('sandbox.lifecycle.', ''));
    let seen = '';
    const events = await waitFor('the idle kill\'s event', async () => {
      const r = await api('GET', `/events/sandboxes/${again.sandboxId}?orderAsc=true&limit=100`);
      seen = r.text;
      return types(r.json).includes('killed') ? r.json as Array<{ type: string; sandboxTeamId: string; sandboxExecutionId: string; eventData: Record<string, unknown> | null }> : undefined;
    }, 60_000).catch((err: Error) => { throw new Error(`${err.message}; the events: ${seen}`); });
    assert.deepEqual(types(events), ['created', 'updated', 'paused', 'resumed', 'killed']);
    assert.deepEqual((events[0]!.eventData as { sandbox_metadata?: unknown }).sandbox_metadata, { purpose: 'events-e2e' });
    assert.equal(events[2]!.sandboxExecutionId, events[0]!.sandboxExecutionId, 'a pause ends the run the create started');
    assert.notEqual(events[3]!.sandboxExecutionId, events[0]!.sandboxExecutionId, 'a resume starts another');
    assert.equal((events[4]!.eventData as { reason?: string }).reason, 'timeout');

    const delivered = await waitFor('five deliveries', async () => (received.length >= 5 ? received : undefined), 20_000);
    for (const d of delivered) {
      const expected = createHash('sha256').update(secret + d.body).digest('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      assert.equal(d.headers['e2b-signature'], expected, 'signed as E2B\'s docs check it');
      assert.equal(d.headers['e2b-webhook-id'], hook.json.id);
      assert.equal(d.headers['e2b-signature-version'], 'v1');
    }
    assert.deepEqual(delivered.map((d) => JSON.parse(d.body).id).sort(), events.map((e) => (e as unknown as { id: string }).id).sort());
    assert.equal((await api('GET', `/events/webhooks/${hook.json.id}`)).json.lastDelivery.outcome, 'delivered');
    // Bad input names the field.
    const bad = await api('GET', '/events/sandboxes?limit=101');
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /limit/);
  } finally {
    await api('DELETE', `/events/webhooks/${hook.json?.id}`);
    receiver.close();
  }
});

test('getMetrics: the official SDK reads the 5 s series its node sampled of a busy sandbox, and none while it is paused (docs/observability.md)', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  try {
    const started = new Date();
    await sbx.commands.run('sh -c "while :; do :; done" >/dev/null 2>&1 &');
    const series = await waitFor('three samples', async () => {
      const m = await sbx.getMetrics();
      return m.length >= 3 ? m : undefined;
    }, 30_000);
    const gaps = series.slice(1).map((s, i) => (s.timestamp.getTime() - series[i]!.timestamp.getTime()) / 1000);
    assert.ok(gaps.every((g) => g >= 4 && g <= 7), `one sample every 5 s: gaps ${gaps.join(', ')}`);
    assert.ok(series.some((s) => s.cpuUsedPct > 50), `the busy loop shows: ${series.map((s) => s.cpuUsedPct).join(', ')}`);
    assert.ok(series.every((s) => s.memTotal > 0 && s.memUsed > 0 && s.diskTotal > 0 && s.timestamp >= new Date(started.getTime() - 1000)), 'every field measured');
    // A range picks its samples.
    const first = await sbx.getMetrics({ start: series[0]!.timestamp, end: series[1]!.timestamp });
    assert.equal(first.length, 2);
    // Paused: no samples while it sleeps.
    await sbx.pause();
    const pausedAt = new Date();
    await new Promise((r) => setTimeout(r, 11_000));
    const resumedAt = new Date();
    const again = await Sandbox.connect(sbx.sandboxId);
    // 2 s margins: the SDK rounds start and end to the nearest second, and a range that reaches the
    // second of the resume answers the live sample of the resumed sandbox (CI at a9f7408 did so).
    const whilePaused = await again.getMetrics({ start: new Date(pausedAt.getTime() + 2000), end: new Date(resumedAt.getTime() - 2000) });
    assert.deepEqual(whilePaused.map((s) => s.timestamp.toISOString()), [], 'nothing was sampled while paused');
    // E2B's batch form: the newest sample of each sandbox asked for.
    const res = await fetch(`${p.apiUrl}/sandboxes/metrics?sandbox_ids=${sbx.sandboxId},nosuchsandbox`, { headers: { 'X-API-Key': p.apiKey } });
    const latest = await res.json() as { sandboxes: Record<string, { timestampUnix: number; cpuCount: number }> };
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(latest.sandboxes), [sbx.sandboxId]);
  } finally {
    await sbx.kill();
  }
});

test('Prometheus scrapes svc up\'s API /metrics with the admin key: a create through the official SDK shows in its queries (docs/observability.md)', async (t) => {
  const prom = await startPrometheus(p);
  t.after(() => prom.stop());
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  try {
    // The data plane counts it too: the SDK's command goes through the proxy.
    assert.equal((await sbx.commands.run('true')).exitCode, 0);
    const value = async (expr: string) => {
      const r = await prom.query(expr);
      return r.length ? Number(r[0]!.value[1]) : undefined;
    };
    await waitFor('svc_sandboxes{state="running"} >= 1 in Prometheus', async () => ((await value('sum(svc_sandboxes{state="running"})') ?? 0) >= 1 ? true : undefined), 60_000);
    await waitFor('svc_sandbox_creates_total in Prometheus', async () => ((await value('sum(svc_sandbox_creates_total{outcome="ok"})') ?? 0) >= 1 ? true : undefined), 30_000);
    assert.equal(await value('up{job="svc"}'), 1, 'the scrape succeeds: the admin key is taken and the text parses');
    assert.ok((await value('sum(svc_sandbox_create_duration_seconds_count)') ?? 0) >= 1);
    await waitFor('svc_proxy_requests_total{code="200"} in Prometheus', async () => ((await value('sum(svc_proxy_requests_total{code="200"})') ?? 0) >= 1 ? true : undefined), 30_000);
    assert.ok((await value('process_resident_memory_bytes{job="svc"}') ?? 0) > 0, 'prom-client\'s process metrics');
  } finally {
    await sbx.kill();
  }
});
