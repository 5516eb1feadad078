/**
 * The command line as the SDK meets it: a bad config or a missing token exits 1 with one line
 * naming the problem (the SDK shows it as "Failed to start MCP gateway: ..."), a server that
 * cannot start exits 1 with its name and last output and leaves nothing running, a second
 * --config replaces the first, the config may come from a file or stdin instead of the command
 * line (where its keys are readable by every process), and `pull` (Template.addMcpServer) knows
 * the built-in servers.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { processAlive } from './start.ts';
import { buildGateway, connect, freePort, runGateway, type Gateway } from './test-support.ts';

let g: Gateway;
let work: string;

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'mcp-gateway-cli-'));
  g = { bundle: await buildGateway(), stateDir: join(work, 'state'), port: await freePort(), token: 'cli-token' };
});

after(async () => {
  await runGateway(g, ['stop']);
  await rm(work, { recursive: true, force: true });
  await rm(g.bundle, { recursive: true, force: true });
});

test('a bad config exits 1 with one line on stderr naming the problem', async () => {
  const cases: [string, RegExp][] = [
    ['{not json', /^mcp-gateway: --config is not valid JSON: /],
    ['["filesystem"]', /^mcp-gateway: --config must be a JSON object of MCP servers by name, got an array$/],
    ['{"filesystem":{}}', /^mcp-gateway: MCP server 'filesystem': 'paths' is required \(the directories the server may use\)$/],
    ['{"time":{},"dockerOnly":{}}', /^mcp-gateway: unknown MCP server 'dockerOnly': svc's gateway runs filesystem, git, memory, sequentialthinking, time, fetch/],
    ['{"brave":{}}', /^mcp-gateway: MCP server 'brave': 'apiKey' is required/],
  ];
  for (const [config, message] of cases) {
    const r = await runGateway(g, ['--config', config]);
    assert.equal(r.code, 1, config);
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    assert.match(r.stderr.trim(), message);
  }
  const noToken = await runGateway(g, ['--config', '{"time":{}}'], { GATEWAY_ACCESS_TOKEN: undefined });
  assert.equal(noToken.code, 1);
  assert.match(noToken.stderr, /^mcp-gateway: GATEWAY_ACCESS_TOKEN is not set/);
  const noArg = await runGateway(g, ['--config']);
  assert.equal(noArg.code, 1);
  assert.match(noArg.stderr, /--config needs the JSON config/);
  assert.ok(!existsSync(join(g.stateDir, 'gateway.pid')), 'nothing was started');
});

test('a server that cannot start: exit 1 with its name and its last output, and nothing left running', async () => {
  const r = await runGateway(g, ['--config', JSON.stringify({ time: {}, filesystem: { paths: [join(work, 'no-such-dir')] } })]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^mcp-gateway: MCP server 'filesystem' failed to start: .*; its last output:\n[\s\S]*None of the specified directories are accessible/);
  assert.ok(!existsSync(join(g.stateDir, 'gateway.pid')));
  assert.match(await readFile(join(g.stateDir, 'gateway.log'), 'utf8'), /stopped\n$/);
  await assert.rejects(fetch(`http://127.0.0.1:${g.port}/mcp`), /fetch failed/);
});

test('a second --config replaces the running gateway', async () => {
  const first = await runGateway(g, ['--config', '{"time":{}}']);
  assert.equal(first.code, 0, first.stderr);
  const firstPid = Number(await readFile(join(g.stateDir, 'gateway.pid'), 'utf8'));
  const second = await runGateway(g, ['--config', '{"sequentialthinking":{}}'], { GATEWAY_ACCESS_TOKEN: 'second-token' });
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, new RegExp(`stopped the gateway that was running \\(pid ${firstPid}\\)`));
  assert.ok(!processAlive(firstPid));
  const client = await connect({ ...g, token: 'second-token' });
  assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['sequentialthinking']);
  await client.close();
  const stop = await runGateway(g, ['stop']);
  assert.match(stop.stdout, /stopped the gateway \(pid \d+\)/);
});

test('--config-file and --config - take the config off the command line; a missing file or empty input exits 1 naming it', async () => {
  const file = join(work, 'config.json');
  await writeFile(file, '{"time":{}}', { mode: 0o600 });
  for (const [args, input] of [[['--config-file', file]], [[`--config-file=${file}`]], [['--config', '-'], '{"time":{}}']] as [string[], string?][]) {
    const r = await runGateway(g, args, {}, { input });
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    const client = await connect(g);
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['get_current_time', 'convert_time'], args.join(' '));
    await client.close();
  }
  await runGateway(g, ['stop']);
  const cases: [string[], string | undefined, RegExp][] = [
    [['--config-file', join(work, 'nope.json')], undefined, /^mcp-gateway: --config-file .*nope\.json: cannot read it \(ENOENT\)$/],
    [['--config-file'], undefined, /^mcp-gateway: --config-file needs the path of a file/],
    [['--config', '-'], '', /^mcp-gateway: --config -: standard input was empty/],
    [['--config', '-'], '{nope', /^mcp-gateway: --config is not valid JSON/],
  ];
  for (const [args, input, message] of cases) {
    const r = await runGateway(g, args, {}, { input });
    assert.equal(r.code, 1, args.join(' '));
    assert.match(r.stderr.trim(), message);
  }
});

test('a config given on the command line is wiped from /proc/<pid>/cmdline while the command waits for its servers', async () => {
  // a remote server that takes the connection and never answers: the command waits for it
  const sockets = new Set<Socket>();
  const silent = createServer((s) => sockets.add(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const secret = 'Bearer remote-secret-4f1c9a';
  const config = JSON.stringify({ remote: { url: `http://127.0.0.1:${(silent.address() as { port: number }).port}/mcp`, headers: { Authorization: secret } } });
  let cmdline = '';
  try {
    const r = await runGateway(g, ['--config', config], { MCP_GATEWAY_START_TIMEOUT: '3' }, {
      onStart: (pid) => {
        const look = setInterval(() => {
          try {
            cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
          } catch {
            clearInterval(look); // exited
          }
          if (cmdline.includes('(hidden)')) clearInterval(look);
        }, 50);
      },
    });
    assert.equal(r.code, 1, 'the remote server never answered');
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
  assert.match(cmdline, /^mcp-gateway --config \(hidden\)/);
  assert.ok(!cmdline.includes('remote-secret'), cmdline);
});

test('pull: built-in servers are there already, unknown names exit 1 naming them', async () => {
  const ok = await runGateway(g, ['pull', 'filesystem', 'time']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /^filesystem: built into the gateway \(runs offline\), nothing to pull\ntime: built into/);
  const bad = await runGateway(g, ['pull', 'time', 'nosuch', 'other']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^mcp-gateway: pull: unknown MCP servers 'nosuch', 'other': svc's gateway runs /);
});

test('--help and --version', async () => {
  const version = await runGateway(g, ['--version']);
  assert.match(version.stdout, /^mcp-gateway \d+\.\d+\.\d+ \(svc\)\n$/);
  const help = await runGateway(g, ['--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /mcp-gateway --config '<json>'[\s\S]*mcp-gateway pull NAME/);
  const wrong = await runGateway(g, ['--nope']);
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /unknown argument '--nope': see mcp-gateway --help/);
});
