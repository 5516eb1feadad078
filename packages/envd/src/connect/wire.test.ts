import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { after, before, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { StatResponseSchema, StatRequestSchema, FileType } from '@svc/contracts/envd/filesystem/filesystem_pb';
import {
  ListResponseSchema,
  SendSignalRequestSchema,
  Signal,
  StartRequestSchema,
  StartResponseSchema,
  StreamInputRequestSchema,
  StreamInputResponseSchema,
  type StartResponse,
} from '@svc/contracts/envd/process/process_pb';
import { startEnvd, type RunningEnvd } from '../testing/envd-process.ts';
import { decode, encode, envelope, openStream, post, readStream, splitEnvelopes } from '../testing/connect-client.ts';

let envd: RunningEnvd;
let dir: string;
let plainFile: string;
const root = { authorization: `Basic ${Buffer.from('root:').toString('base64')}` };

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'envd-wire-'));
  plainFile = join(dir, 'plain.txt');
  await writeFile(plainFile, 'plain');
  await chmod(plainFile, 0o644);
  envd = await startEnvd({ ENVD_DEFAULT_USER: 'root', SANDBOX_GREETING: 'hello from the sandbox' });
});
after(async () => {
  await envd.stop();
  await rm(dir, { recursive: true, force: true });
});

function startBody(cmd: string, binary: boolean, extra: Record<string, unknown> = {}) {
  return envelope(0, Buffer.from(encode(StartRequestSchema, { process: { cmd: '/bin/bash', args: ['-c', cmd] }, stdin: false, ...extra }, binary)));
}

function output(messages: StartResponse[], kind: 'stdout' | 'stderr' | 'pty'): string {
  return messages
    .map((m) => m.event?.event)
    .filter((e) => e?.case === 'data' && e.value.output.case === kind)
    .map((e) => Buffer.from((e as { value: { output: { value: Uint8Array } } }).value.output.value).toString())
    .join('');
}

for (const binary of [false, true]) {
  const codec = binary ? 'proto' : 'json';

  test(`unary over application/${codec}`, async () => {
    const res = await post(`${envd.url}/filesystem.Filesystem/Stat`, encode(StatRequestSchema, { path: plainFile }, binary), {
      'content-type': `application/${codec}`,
      ...root,
    });
    assert.equal(res.status, 200, res.body.toString());
    assert.equal(res.headers.get('content-type'), `application/${codec}`);
    const entry = decode(StatResponseSchema, res.body, binary).entry!;
    assert.equal(entry.path, plainFile);
    assert.equal(entry.type, FileType.FILE);
    assert.equal(entry.permissions, '-rw-r--r--');
  });

  test(`server stream over application/connect+${codec}: start, output, end`, async () => {
    const res = await post(`${envd.url}/process.Process/Start`, startBody('echo out; echo err >&2; echo $SANDBOX_GREETING; exit 7', binary), {
      'content-type': `application/connect+${codec}`,
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), `application/connect+${codec}`);
    const { messages, end } = readStream(StartResponseSchema, res.body, binary);
    assert.deepEqual(end, {});
    assert.equal(messages[0]!.event?.event.case, 'start');
    assert.equal(output(messages, 'stdout'), 'out\nhello from the sandbox\n');
    assert.equal(output(messages, 'stderr'), 'err\n');
    const last = messages.at(-1)!.event!.event;
    assert.equal(last.case, 'end');
    assert.equal(last.case === 'end' && last.value.exitCode, 7);
    assert.equal(last.case === 'end' && last.value.status, 'exit status 7');
  });
}

test('gzip-compressed unary request and stream messages are accepted', async () => {
  const unary = await post(`${envd.url}/filesystem.Filesystem/Stat`, gzipSync(Buffer.from(JSON.stringify({ path: plainFile }))), {
    'content-type': 'application/json',
    'content-encoding': 'gzip',
  });
  assert.equal(unary.status, 200, unary.body.toString());
  const message = Buffer.from(encode(StartRequestSchema, { process: { cmd: '/bin/echo', args: ['zipped'] }, stdin: false }, true));
  const res = await post(`${envd.url}/process.Process/Start`, envelope(1, gzipSync(message)), {
    'content-type': 'application/connect+proto',
    'connect-content-encoding': 'gzip',
  });
  const { messages, end } = readStream(StartResponseSchema, res.body, true);
  assert.deepEqual(end, {});
  assert.equal(output(messages, 'stdout'), 'zipped\n');
});

test('Connect-Timeout-Ms ends the stream with deadline_exceeded and kills the process', async () => {
  const started = Date.now();
  const res = await post(`${envd.url}/process.Process/Start`, startBody('sleep 30', false, { tag: 'deadline' }), {
    'content-type': 'application/connect+json',
    'connect-timeout-ms': '400',
  });
  assert.ok(Date.now() - started < 10_000);
  const { end } = readStream(StartResponseSchema, res.body, false);
  assert.equal(end.error?.code, 'deadline_exceeded');
  await new Promise((r) => setTimeout(r, 300));
  const list = await post(`${envd.url}/process.Process/List`, '{}', { 'content-type': 'application/json' });
  const processes = decode(ListResponseSchema, list.body, false).processes;
  assert.ok(!processes.some((p) => p.tag === 'deadline'), 'the timed-out process is gone');
});

test('Connect-Timeout-Ms bounds unary calls too', async () => {
  // stdin that nobody reads: a large write blocks until the deadline.
  const stream = openStream(`${envd.url}/process.Process/Start`, StartResponseSchema, encode(StartRequestSchema, { process: { cmd: '/bin/sleep', args: ['30'] }, stdin: true, tag: 'blocked-stdin' }, false), {}, false);
  await stream.next();
  const input = JSON.stringify({ process: { tag: 'blocked-stdin' }, input: { stdin: Buffer.alloc(4 << 20).toString('base64') } });
  const res = await post(`${envd.url}/process.Process/SendInput`, input, { 'content-type': 'application/json', 'connect-timeout-ms': '300' });
  assert.equal(res.status, 504);
  assert.equal(JSON.parse(res.body.toString()).code, 'deadline_exceeded');
  const kill = await post(`${envd.url}/process.Process/SendSignal`, JSON.stringify({ process: { tag: 'blocked-stdin' }, signal: 'SIGNAL_SIGKILL' }), { 'content-type': 'application/json' });
  assert.equal(kill.status, 200);
  for await (const _ of stream);
});

test('an invalid Connect-Timeout-Ms is invalid_argument', async () => {
  const res = await post(`${envd.url}/process.Process/List`, '{}', { 'content-type': 'application/json', 'connect-timeout-ms': 'soon' });
  assert.equal(res.status, 400);
  assert.equal(JSON.parse(res.body.toString()).code, 'invalid_argument');
});

test('keepalives are sent at the interval the client asks for', async () => {
  const events: string[] = [];
  for await (const message of openStream(`${envd.url}/process.Process/Start`, StartResponseSchema, encode(StartRequestSchema, { process: { cmd: '/bin/sleep', args: ['2.5'] }, stdin: false }, false), { 'keepalive-ping-interval': '1' }, false)) {
    events.push(message.event!.event.case!);
  }
  assert.equal(events[0], 'start');
  assert.ok(events.filter((e) => e === 'keepalive').length >= 2, events.join(','));
  assert.equal(events.at(-1), 'end');
});

test('errors carry Connect codes and HTTP statuses', async () => {
  const json = { 'content-type': 'application/json' };
  const cases: [string, string | Uint8Array, Record<string, string>, number, string][] = [
    ['/process.Process/SendSignal', encode(SendSignalRequestSchema, { process: { selector: { case: 'pid', value: 999_999 } }, signal: Signal.SIGKILL }, false), json, 404, 'not_found'],
    ['/filesystem.Filesystem/Stat', '{"path":"/no/such/file"}', json, 404, 'not_found'],
    ['/filesystem.Filesystem/MakeDir', '{"path":"/tmp"}', json, 409, 'already_exists'],
    ['/filesystem.Filesystem/ListDir', JSON.stringify({ path: plainFile }), json, 400, 'invalid_argument'],
    ['/filesystem.Filesystem/Stat', '{"path": 12', json, 400, 'invalid_argument'],
    ['/filesystem.Filesystem/Stat', '{"path":"~other/x"}', json, 400, 'invalid_argument'],
    ['/process.Process/SendSignal', '{"process":{"pid":1},"signal":"SIGNAL_UNSPECIFIED"}', json, 404, 'not_found'],
    ['/process.Process/Nope', '{}', json, 404, 'unimplemented'],
    ['/process.Process/List', '{}', { 'content-type': 'text/plain' }, 415, 'unknown'],
    ['/process.Process/List', '{}', { ...json, authorization: `Basic ${Buffer.from('nobody-here:').toString('base64')}` }, 401, 'unauthenticated'],
  ];
  for (const [path, body, headers, status, code] of cases) {
    const res = await post(`${envd.url}${path}`, body, headers);
    assert.equal(res.status, status, `${path} ${String(body)}: ${res.body.toString()}`);
    assert.equal(JSON.parse(res.body.toString()).code, code, `${path} ${String(body)}`);
  }
});

test('a move across filesystems onto an existing directory is the caller\'s mistake (400), not internal', async () => {
  const src = join('/dev/shm', `envd-move-${process.pid}`);
  const dstDir = await mkdtemp(join(tmpdir(), 'envd-move-dst-'));
  await writeFile(src, 'x');
  try {
    const res = await post(`${envd.url}/filesystem.Filesystem/Move`, JSON.stringify({ source: src, destination: dstDir }), { 'content-type': 'application/json', ...root });
    assert.equal(res.status, 400, res.body.toString());
    assert.equal(JSON.parse(res.body.toString()).code, 'invalid_argument');
  } finally {
    await rm(src, { force: true });
    await rm(dstDir, { recursive: true, force: true });
  }
});

test('start errors end the stream with a clear code', async () => {
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ process: { cmd: 'definitely-not-a-binary' } }, 'not_found', /not found in PATH/],
    [{ process: { cmd: plainFile } }, 'permission_denied', /not executable/],
    [{ process: { cmd: '/bin/true', cwd: '/no/such/dir' } }, 'invalid_argument', /cwd '\/no\/such\/dir' does not exist/],
    [{ process: { cmd: '' } }, 'invalid_argument', /must not be empty/],
  ];
  for (const [request, code, message] of cases) {
    const res = await post(`${envd.url}/process.Process/Start`, envelope(0, Buffer.from(JSON.stringify(request))), { 'content-type': 'application/connect+json' });
    assert.equal(res.status, 200);
    const envelopes = splitEnvelopes(res.body);
    assert.equal(envelopes.length, 1);
    const end = JSON.parse(envelopes[0]!.data.toString());
    assert.equal(end.error.code, code, JSON.stringify(end));
    assert.match(end.error.message, message);
  }
  // envd is still fine afterwards
  const list = await post(`${envd.url}/process.Process/List`, '{}', { 'content-type': 'application/json' });
  assert.equal(list.status, 200);
});

test('client streaming: StreamInput feeds a process started with stdin', async () => {
  const controller = new AbortController();
  const stream = openStream(`${envd.url}/process.Process/Start`, StartResponseSchema, encode(StartRequestSchema, { process: { cmd: '/bin/cat' }, stdin: true, tag: 'cat-1' }, true), {}, true, controller.signal);
  const first = await stream.next();
  assert.equal(first.value?.event?.event.case, 'start');

  const inputs: MessageInitShape<typeof StreamInputRequestSchema>[] = [
    { event: { case: 'start' as const, value: { process: { selector: { case: 'tag' as const, value: 'cat-1' } } } } },
    { event: { case: 'data' as const, value: { input: { input: { case: 'stdin' as const, value: Buffer.from('line one\n') } } } } },
    { event: { case: 'keepalive' as const, value: {} } },
    { event: { case: 'data' as const, value: { input: { input: { case: 'stdin' as const, value: Buffer.from('line two\n') } } } } },
  ];
  const body = Buffer.concat(inputs.map((m) => envelope(0, encode(StreamInputRequestSchema, m, true) as Uint8Array)));
  const res = await post(`${envd.url}/process.Process/StreamInput`, body, { 'content-type': 'application/connect+proto' });
  const { messages, end } = readStream(StreamInputResponseSchema, res.body, true);
  assert.deepEqual(end, {});
  assert.equal(messages.length, 1);

  const close = await post(`${envd.url}/process.Process/CloseStdin`, JSON.stringify({ process: { tag: 'cat-1' } }), { 'content-type': 'application/json' });
  assert.equal(close.status, 200, close.body.toString());
  let out = '';
  let exit: number | undefined;
  for await (const message of stream) {
    const event = message.event!.event;
    if (event.case === 'data' && event.value.output.case === 'stdout') out += Buffer.from(event.value.output.value).toString();
    if (event.case === 'end') exit = event.value.exitCode;
  }
  assert.equal(out, 'line one\nline two\n');
  assert.equal(exit, 0);
});

test('a client that goes away does not stop the process, and Connect finds it again', async () => {
  const controller = new AbortController();
  const stream = openStream(`${envd.url}/process.Process/Start`, StartResponseSchema, encode(StartRequestSchema, { process: { cmd: '/bin/bash', args: ['-c', 'sleep 1; echo done'] }, stdin: false }, false), {}, false, controller.signal);
  const first = await stream.next();
  const pid = first.value!.event!.event.case === 'start' ? first.value!.event!.event.value.pid : 0;
  controller.abort();
  await stream.return(undefined).catch(() => { /* closing a stream the server already ended */ });
  const connected = openStream(`${envd.url}/process.Process/Connect`, StartResponseSchema, JSON.stringify({ process: { pid } }), {}, false);
  const events: string[] = [];
  let out = '';
  for await (const message of connected) {
    const event = message.event!.event;
    events.push(event.case!);
    if (event.case === 'data' && event.value.output.case === 'stdout') out += Buffer.from(event.value.output.value).toString();
  }
  assert.equal(events[0], 'start');
  assert.equal(events.at(-1), 'end');
  assert.equal(out, 'done\n');
  // After exit, a late Connect still learns how it ended.
  const late = await post(`${envd.url}/process.Process/Connect`, envelope(0, Buffer.from(JSON.stringify({ process: { pid } }))), { 'content-type': 'application/connect+json' });
  const { messages } = readStream(StartResponseSchema, late.body, false);
  assert.deepEqual(messages.map((m) => m.event!.event.case), ['start', 'end']);
});
