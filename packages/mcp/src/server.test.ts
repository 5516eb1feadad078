/**
 * Every tool through the MCP SDK's client, in memory, against the SDK's fake API, envd and code
 * interpreter behind a data plane that routes as the proxy does (test-support/fake-platform.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Sandbox } from '@svc/sdk';
import { connectInMemory, memoryLog, textOf } from './test-support/client.ts';
import { startFakePlatform, type FakePlatform } from './test-support/fake-platform.ts';

const TOOLS = [
  'create_sandbox', 'get_url', 'kill_sandbox', 'list_files', 'list_sandboxes', 'pause_sandbox', 'read_file', 'resume_sandbox', 'run_code',
  'run_command', 'write_file',
];
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

let fake: FakePlatform;
let mcp: Awaited<ReturnType<typeof connectInMemory>>;
let dir: string;
const conn = () => ({ apiUrl: fake.api.url, apiKey: fake.apiKey, sandboxUrl: fake.sandboxUrl });

before(async () => {
  fake = await startFakePlatform();
  mcp = await connectInMemory(conn());
  dir = mkdtempSync(join(tmpdir(), 'svc-mcp-'));
});
after(async () => {
  await mcp.close();
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

async function newSandbox(args: Record<string, unknown> = {}): Promise<string> {
  const r = await mcp.call('create_sandbox', args);
  assert.ok(!r.isError, textOf(r));
  return r.structuredContent!.sandboxId as string;
}

test('tools/list: the eleven tools, each with a description and a JSON schema', async () => {
  const { tools } = await mcp.client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  for (const t of tools) {
    assert.ok((t.description ?? '').length > 40, `${t.name} has a description`);
    assert.equal(t.inputSchema.type, 'object');
  }
  const run = tools.find((t) => t.name === 'run_command')!;
  assert.deepEqual([...(run.inputSchema.required ?? [])].sort(), ['command', 'sandboxId']);
  const props = run.inputSchema.properties as Record<string, { type?: string }>;
  assert.equal(props.timeoutSeconds.type, 'integer');
  assert.equal(props.background.type, 'boolean');
  assert.equal(tools.find((t) => t.name === 'run_code')!.inputSchema.required?.join(), 'code');
});

describe('sandboxes', () => {
  test('create_sandbox sends the template, timeout, metadata and envs; list_sandboxes shows it and filters', async () => {
    const id = await newSandbox({ template: 'base', timeoutSeconds: 120, metadata: { owner: 'mcp' }, envs: { A: '1' } });
    const body = fake.api.lastCreate()!;
    assert.deepEqual([body.templateID, body.timeout, body.metadata, body.envVars], ['base', 120, { owner: 'mcp' }, { A: '1' }]);
    await newSandbox();
    assert.equal(fake.api.lastCreate()!.timeout, 300, 'a model\'s sandbox times out by default');
    const all = await mcp.call('list_sandboxes', {});
    assert.match(textOf(all), new RegExp(`${id}  running  template base .* owner=mcp`));
    const mine = await mcp.call('list_sandboxes', { metadata: { owner: 'mcp' } });
    assert.deepEqual((mine.structuredContent!.sandboxes as Array<{ sandboxId: string }>).map((s) => s.sandboxId), [id]);
    assert.equal(fake.api.requests.at(-1)!.headers['x-api-key'], fake.apiKey, 'with the caller\'s key');
  });

  test('an unknown template is a tool error that says what to do', async () => {
    const r = await mcp.call('create_sandbox', { template: 'nope' });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /nope.*template your team has/);
  });

  test('pause, a refused command while paused, resume, kill; an unknown sandbox says so', async () => {
    const id = await newSandbox();
    assert.ok(!(await mcp.call('run_command', { sandboxId: id, command: 'true' })).isError);
    assert.match(textOf(await mcp.call('pause_sandbox', { sandboxId: id })), /paused sandbox/);
    assert.match(textOf(await mcp.call('pause_sandbox', { sandboxId: id })), /already paused/);
    for (const [tool, args] of [['run_command', { command: 'true' }], ['read_file', { path: '/etc/hostname' }], ['run_code', { code: '1' }]] as const) {
      const r = await mcp.call(tool, { sandboxId: id, ...args });
      assert.equal(r.isError, true, tool);
      assert.equal(textOf(r), `sandbox ${id} is paused: call resume_sandbox first, then try again`);
    }
    assert.equal(fake.api.sandboxes.get(id)!.state, 'paused', 'nothing resumed it behind the model\'s back');
    assert.match(textOf(await mcp.call('resume_sandbox', { sandboxId: id, timeoutSeconds: 600 })), /is running/);
    assert.equal(fake.api.sandboxes.get(id)!.timeout, 600);
    assert.ok(!(await mcp.call('run_command', { sandboxId: id, command: 'true' })).isError);

    // paused behind the session's back while it holds the sandbox: the data plane's 502, explained
    fake.api.sandboxes.get(id)!.state = 'paused';
    assert.match(textOf(await mcp.call('run_command', { sandboxId: id, command: 'true' })), /is paused: call resume_sandbox/);
    fake.api.sandboxes.get(id)!.state = 'running';

    assert.match(textOf(await mcp.call('kill_sandbox', { sandboxId: id })), /killed sandbox/);
    for (const tool of ['kill_sandbox', 'run_command', 'pause_sandbox', 'get_url'] as const) {
      const r = await mcp.call(tool, { sandboxId: id, command: 'true', port: 80 });
      assert.equal(r.isError, true, tool);
      assert.match(textOf(r), new RegExp(`no sandbox ${id} in your team .*list_sandboxes`), tool);
    }
  });

  test('a sandbox killed behind the session\'s back is unknown to the next call', async () => {
    const id = await newSandbox();
    assert.ok(!(await mcp.call('list_files', { sandboxId: id, path: dir })).isError);
    await Sandbox.kill(id, conn());
    const r = await mcp.call('list_files', { sandboxId: id, path: dir });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /no sandbox .* in your team/);
  });

  test('a busy platform is a tool error with when to retry', async () => {
    const id = await newSandbox();
    fake.api.busyOnce.add(id);
    const r = await mcp.call('kill_sandbox', { sandboxId: id });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /busy; retry in 1 s/);
    assert.ok(!(await mcp.call('kill_sandbox', { sandboxId: id })).isError);
  });

  test('get_url: the port\'s host through the proxy, and the traffic token a private sandbox wants', async () => {
    const id = await newSandbox();
    const port = new URL(fake.sandboxUrl).port;
    const r = await mcp.call('get_url', { sandboxId: id, port: 8080 });
    assert.equal(r.structuredContent!.url, `http://8080-${id}.localhost:${port}`);
    const priv = await Sandbox.create('base', { ...conn(), network: { allowPublicTraffic: false } });
    const p = await mcp.call('get_url', { sandboxId: priv.sandboxId, port: 3000 });
    assert.deepEqual(p.structuredContent!.headers, { 'e2b-traffic-access-token': priv.trafficAccessToken });
    assert.match(textOf(p), /must carry the header e2b-traffic-access-token/);
  });
});

describe('run_command', () => {
  let id: string;
  before(async () => { id = await newSandbox(); });

  test('stdout, stderr and the exit code; a non-zero exit is a result, not an error', async () => {
    const r = await mcp.call('run_command', { sandboxId: id, command: 'echo "$X from $(pwd)"; echo oops >&2; exit 3', cwd: dir, envs: { X: 'hi' } });
    assert.equal(r.isError, undefined);
    assert.deepEqual(r.structuredContent, { stdout: `hi from ${dir}\n`, stderr: 'oops\n', exitCode: 3 });
    assert.equal(textOf(r), `exit code 3\nstdout:\nhi from ${dir}\n\nstderr:\noops\n`);
    assert.match(textOf(await mcp.call('run_command', { sandboxId: id, command: 'true' })), /^exit code 0\nstdout: \(empty\)$/);
  });

  test('past its timeout the command is killed: a tool error with the output so far', async () => {
    const started = Date.now();
    const r = await mcp.call('run_command', { sandboxId: id, command: 'echo begun; sleep 20', timeoutSeconds: 1 });
    assert.ok(Date.now() - started < 10_000);
    assert.equal(r.isError, true);
    assert.match(textOf(r), /^timed out: the command did not finish within 1 s and was killed;.*\nstdout:\nbegun/s);
  });

  test('background: the pid at once, the command left running', async () => {
    const r = await mcp.call('run_command', { sandboxId: id, command: `sleep 30; echo late > ${dir}/late`, background: true });
    const pid = r.structuredContent!.pid as number;
    assert.ok(pid > 0, textOf(r));
    assert.match(textOf(r), new RegExp(`pid ${pid}`));
    assert.doesNotThrow(() => process.kill(pid, 0), 'still running');
    process.kill(pid, 'SIGKILL');
  });

  test('long output is cut to its tail, saying so', async () => {
    const r = await mcp.call('run_command', { sandboxId: id, command: 'head -c 200000 /dev/zero | tr "\\0" a; echo END' });
    const stdout = r.structuredContent!.stdout as string;
    assert.ok(stdout.length < 51_000);
    assert.ok(/^\[… the first 150004 characters were cut …\]\na{49996}END\n$/.test(stdout), stdout.slice(0, 100));
  });

  test('a wrong argument type is refused by the schema, naming it, and the session goes on', async () => {
    const r = await mcp.call('run_command', { sandboxId: id, command: 42 });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /Input validation error.*command/s);
    const missing = await mcp.call('run_command', { command: 'true' });
    assert.match(textOf(missing), /sandboxId/);
    assert.equal((await mcp.call('run_command', { sandboxId: id, command: 'true', timeoutSeconds: 'soon' })).isError, true);
    assert.ok(!(await mcp.call('run_command', { sandboxId: id, command: 'true' })).isError);
  });
});

describe('files', () => {
  let id: string;
  before(async () => { id = await newSandbox(); });

  test('write_file makes the parents; read_file and list_files see it', async () => {
    const path = join(dir, 'notes', 'a.txt');
    assert.match(textOf(await mcp.call('write_file', { sandboxId: id, path, content: 'line one\nline two\n' })), /wrote 18 B to .*a\.txt/);
    assert.equal(readFileSync(path, 'utf8'), 'line one\nline two\n');
    assert.equal(textOf(await mcp.call('read_file', { sandboxId: id, path })), 'line one\nline two\n');
    await mcp.call('write_file', { sandboxId: id, path: join(dir, 'notes', 'bin'), content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' });
    assert.deepEqual([...readFileSync(join(dir, 'notes', 'bin'))], [0, 1, 2, 255]);
    const listed = await mcp.call('list_files', { sandboxId: id, path: join(dir, 'notes') });
    assert.deepEqual(listed.structuredContent!.entries, [
      { name: 'a.txt', path, type: 'file', size: 18 },
      { name: 'bin', path: join(dir, 'notes', 'bin'), type: 'file', size: 4 },
    ]);
    assert.match(textOf(listed), /^file +18 {2}a\.txt\nfile +4 {2}bin$/);
    assert.match(textOf(await mcp.call('list_files', { sandboxId: id, path: dir })), /^dir +- {2}notes$/m);
  });

  test('read_file: binary files by their size, images as images, long text cut and said, a missing file named', async () => {
    writeFileSync(join(dir, 'blob'), Buffer.from([1, 0, 2, 3]));
    assert.match(textOf(await mcp.call('read_file', { sandboxId: id, path: join(dir, 'blob') })), /blob is a binary file .*of 4 bytes/);
    writeFileSync(join(dir, 'chart.png'), PNG);
    const img = await mcp.call('read_file', { sandboxId: id, path: join(dir, 'chart.png') });
    assert.deepEqual(img.content[1], { type: 'image', data: PNG.toString('base64'), mimeType: 'image/png' });
    writeFileSync(join(dir, 'big.txt'), 'x'.repeat(250_000));
    const big = textOf(await mcp.call('read_file', { sandboxId: id, path: join(dir, 'big.txt') }));
    assert.match(big, /^x{100000}\n\[… truncated: this is the first 100000 of 250000 bytes; read further with run_command/);
    writeFileSync(join(dir, 'empty'), '');
    assert.match(textOf(await mcp.call('read_file', { sandboxId: id, path: join(dir, 'empty') })), /is empty/);
    const missing = await mcp.call('read_file', { sandboxId: id, path: join(dir, 'none.txt') });
    assert.equal(missing.isError, true);
    assert.match(textOf(missing), /none\.txt.*no such file/);
  });
});

describe('run_code', () => {
  test('without a sandbox: one code-interpreter-v1 sandbox for the session, reused, killed when the session closes', async () => {
    const session = await connectInMemory(conn());
    const creates = () => fake.api.requests.filter((r) => r.method === 'POST' && r.url === '/v2/sandboxes').length;
    const before = creates();
    const first = await session.call('run_code', { code: 'x = 21' });
    assert.equal(creates(), before + 1);
    assert.equal(fake.api.lastCreate()!.templateID, 'code-interpreter-v1');
    const id = /started this session's code sandbox (\S+)/.exec(textOf(first))![1];
    assert.ok(fake.api.sandboxes.has(id));
    const second = await session.call('run_code', { code: 'x * 2' });
    assert.equal(creates(), before + 1, 'reused');
    assert.match(textOf(second), new RegExp(`^ran in sandbox ${id}\nstdout:\nx \\* 2\nresult:\nok$`));
    assert.equal(fake.ci.requests.at(-1)!.headers['e2b-sandbox-id'], id);
    assert.match(textOf(await session.call('list_sandboxes', {})), new RegExp(`${id} .*this session's run_code sandbox`));
    await session.close();
    assert.equal(fake.api.sandboxes.has(id), false, 'killed with the session');
  });

  test('results as text, charts as images, an exception as a tool error with its traceback', async () => {
    fake.ci.onExecute = (_req, answer) => {
      answer.line({ type: 'stdout', text: 'printed\n', timestamp: new Date().toISOString() });
      answer.line({ type: 'result', text: '<Figure size 640x480>', png: PNG.toString('base64'), is_main_result: false });
      answer.line({ type: 'result', text: '42', is_main_result: true });
      answer.end();
    };
    const r = await mcp.call('run_code', { code: 'plot', language: 'python' });
    assert.equal(r.isError, undefined);
    assert.match(textOf(r), /stdout:\nprinted\n\noutput:\n<Figure size 640x480>\nresult:\n42$/);
    assert.deepEqual(r.content[1], { type: 'image', data: PNG.toString('base64'), mimeType: 'image/png' });
    fake.ci.onExecute = (_req, answer) => {
      answer.line({ type: 'error', name: 'ZeroDivisionError', value: 'division by zero', traceback: '\x1b[0;31mTraceback\x1b[0m (most recent call last):\n  in f\nZeroDivisionError: division by zero' });
      answer.end();
    };
    const err = await mcp.call('run_code', { code: '1/0' });
    assert.equal(err.isError, true);
    assert.match(textOf(err), /error: ZeroDivisionError: division by zero\nTraceback \(most recent call last\):\n {2}in f/);
    fake.ci.onExecute = (req, answer) => {
      answer.line({ type: 'result', text: `ran ${req.language}`, is_main_result: true });
      answer.end();
    };
    assert.match(textOf(await mcp.call('run_code', { code: '1', language: 'javascript' })), /ran javascript/);
    const bad = await mcp.call('run_code', { code: '1', language: 'cobol' });
    assert.equal(bad.isError, true, 'an unknown language is refused by the schema');
  });

  test('results past the output limit stop the run as printed output does: display data and errors count', async () => {
    fake.ci.onExecute = async (_req, answer) => {
      answer.start();
      // 1 MB a result, as a loop of display() sends them: before 2026-11-30 all of them were kept.
      // (A single line past MAX_CODE_LINE_CHARS stops the run sooner: tool-limits.test.ts.)
      for (let i = 0; i < 6; i++) {
        answer.line({ type: 'result', text: 'x'.repeat(1024 * 1024), is_main_result: false });
        await new Promise((r) => setImmediate(r));
      }
      answer.end();
    };
    const r = await mcp.call('run_code', { code: 'while True: display("x" * 10**7)' });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /^the code printed more than \d+ MB and its output was cut off/);
  });

  test('past its timeout the run is interrupted: a tool error', async () => {
    fake.ci.onExecute = async (_req, answer) => {
      answer.start();
      await answer.clientGone;
    };
    const r = await mcp.call('run_code', { code: 'while True: pass', timeoutSeconds: 1 });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /^timed out: the code ran longer than 1 s/);
  });

  test('the session\'s sandbox gone: a new one, said', async () => {
    fake.ci.onExecute = (_req, answer) => { answer.end(); };
    const session = await connectInMemory(conn());
    const first = /code sandbox (\S+)/.exec(textOf(await session.call('run_code', { code: 'a = 1' })))![1];
    assert.match(textOf(await session.call('kill_sandbox', { sandboxId: first })), /killed/);
    const next = await session.call('run_code', { code: 'a' });
    assert.match(textOf(next), /started this session's code sandbox/);
    await Sandbox.kill(/code sandbox (\S+)/.exec(textOf(next))![1], conn());
    const again = await session.call('run_code', { code: 'a' });
    assert.match(textOf(again), /code sandbox \S+ was gone \(killed or timed out\), so \S+ was started: variables from earlier runs are lost/);
    await session.close();
  });

  test('a platform without the code-interpreter-v1 template: a tool error that says so', async () => {
    const template = fake.api.templates.get('code-interpreter-v1')!;
    fake.api.templates.delete('code-interpreter-v1');
    try {
      const session = await connectInMemory(conn());
      const r = await session.call('run_code', { code: '1' });
      assert.equal(r.isError, true);
      assert.match(textOf(r), /^run_code needs the code-interpreter-v1 template, which this platform does not have .*run_command/);
      await session.close();
    } finally {
      fake.api.templates.set('code-interpreter-v1', template);
    }
  });

  test('in a named sandbox', async () => {
    fake.ci.onExecute = (_req, answer) => { answer.end(); };
    const id = await newSandbox({ template: 'code-interpreter-v1' });
    const r = await mcp.call('run_code', { code: 'pass', sandboxId: id });
    assert.match(textOf(r), new RegExp(`^ran in sandbox ${id}\n\\(no output`));
  });
});

test('a failure of the API itself is a tool error, logged for the operator', async () => {
  const log = memoryLog();
  const s = await connectInMemory({ apiUrl: 'http://127.0.0.1:1', apiKey: 'k', sandboxUrl: fake.sandboxUrl }, log);
  const r = await s.call('list_sandboxes', {});
  assert.equal(r.isError, true);
  assert.ok(textOf(r).length > 10, textOf(r));
  await s.close();
});
