/**
 * `keepOutput: false` (svc's own option): output reaches the callbacks only, and nothing of it is
 * held by the handle, the result or the Execution; by default everything is kept as the e2b SDK does.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CommandExitError, Sandbox, type OutputMessage, type Result } from './index.ts';
import { startFakeCodeInterpreter, type FakeCodeInterpreter } from './testing/fake-code-interpreter.ts';
import { startFakeEnvd, type FakeEnvd } from './testing/fake-envd.ts';

let envd: FakeEnvd;
let ci: FakeCodeInterpreter;
const sandboxAt = (sandboxUrl: string) => new Sandbox({ sandboxId: 'sbx-keep', envdVersion: '0.6.4', sandboxUrl, envdAccessToken: 'tok', apiUrl: 'http://127.0.0.1:1' });

before(async () => {
  envd = await startFakeEnvd();
  ci = await startFakeCodeInterpreter();
});
after(async () => {
  await envd.close();
  await ci.close();
});

test('commands.run: with keepOutput false the callbacks get the output, the result and the handle keep none', async () => {
  const sbx = sandboxAt(envd.url);
  const out: string[] = [];
  const err: string[] = [];
  const r = await sbx.commands.run('echo hello; echo oops >&2', { onStdout: (d) => { out.push(d); }, onStderr: (d) => { err.push(d); }, keepOutput: false });
  assert.deepEqual([r.exitCode, r.stdout, r.stderr, out.join(''), err.join('')], [0, '', '', 'hello\n', 'oops\n']);
  await assert.rejects(sbx.commands.run('echo partial; exit 3', { keepOutput: false }), (e: unknown) => e instanceof CommandExitError && e.exitCode === 3 && e.stdout === '');
  const h = await sbx.commands.run('echo bg', { background: true, keepOutput: false, onStdout: (d) => { out.push(d); } });
  await h.wait();
  assert.equal(h.stdout, '');
  assert.ok(out.includes('bg\n'));
  const kept = await sbx.commands.run('echo kept');
  assert.equal(kept.stdout, 'kept\n', 'kept by default');
});

test('runCode: with keepOutput false the callbacks get the output and results, the Execution keeps neither', async () => {
  const sbx = sandboxAt(ci.url);
  const seen: string[] = [];
  const results: Result[] = [];
  const execution = await sbx.runCode('print(1)', { onStdout: (m: OutputMessage) => { seen.push(m.line); }, onResult: (r) => { results.push(r); }, keepOutput: false });
  assert.deepEqual(execution.logs, { stdout: [], stderr: [] });
  assert.deepEqual(execution.results, []);
  assert.equal(execution.executionCount, 1);
  assert.deepEqual(seen, ['print(1)']);
  assert.equal(results[0]?.text, 'ok');
  const kept = await sbx.runCode('print(2)');
  assert.deepEqual([kept.logs.stdout, kept.text], [['print(2)'], 'ok'], 'kept by default');
});
