/**
 * The per-call bounds on what the SDK buffers of a sandbox's answer: `files.list`'s `maxBytes` and
 * `runCode`'s `maxLineChars`. Without them the defaults (64 MiB, envd's own bound) apply, as for
 * any SDK user; the gateway's /mcp tools pass smaller ones (packages/mcp/src/output.ts).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { InvalidArgumentError, Sandbox, SandboxError } from './index.ts';
import { startFakeCodeInterpreter, type FakeCodeInterpreter } from './testing/fake-code-interpreter.ts';
import { startFakeEnvd, type FakeEnvd } from './testing/fake-envd.ts';

const sandboxAt = (sandboxUrl: string) => new Sandbox({ sandboxId: 'sbx-bounds', envdVersion: '0.6.4', sandboxUrl, envdAccessToken: 'tok', apiUrl: 'http://127.0.0.1:1' });
const tooLarge = (pattern: RegExp) => (e: unknown) => e instanceof SandboxError && e.code === 'too_large' && pattern.test(e.message);

describe('files.list maxBytes', () => {
  let envd: FakeEnvd;
  let dir: string;
  before(async () => {
    envd = await startFakeEnvd();
    dir = mkdtempSync(join(tmpdir(), 'svc-sdk-bounds-'));
    mkdirSync(join(dir, 'sub'));
    for (let i = 0; i < 20; i++) writeFileSync(join(dir, `file-${i}`), 'x');
  });
  after(async () => {
    await envd.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a listing past maxBytes rejects as too_large, before it is parsed; within it, or without it, the listing comes', async () => {
    const sbx = sandboxAt(envd.url);
    await assert.rejects(sbx.files.list(dir, { maxBytes: 1_000 }), tooLarge(/ListDir: the answer is larger than 1000 bytes/));
    assert.equal((await sbx.files.list(dir, { maxBytes: 1024 * 1024 })).length, 21);
    assert.equal((await sbx.files.list(dir)).length, 21, 'the default is unchanged');
  });

  test('a maxBytes that is not a positive whole number is refused before any request', async () => {
    const sbx = sandboxAt(envd.url);
    const before = envd.requests.length;
    for (const maxBytes of [0, -1, 1.5, Number.NaN]) {
      await assert.rejects(sbx.files.list(dir, { maxBytes }), (e: unknown) => e instanceof InvalidArgumentError && /^maxBytes must be a positive whole number/.test((e as Error).message));
    }
    assert.equal(envd.requests.length, before);
  });
});

describe('runCode maxLineChars', () => {
  let ci: FakeCodeInterpreter;
  before(async () => { ci = await startFakeCodeInterpreter(); });
  after(() => ci.close());

  test('a line past maxLineChars ends the run as too_large (not as a failed connection); the default takes it', async () => {
    ci.onExecute = async (_req, answer) => {
      answer.line({ type: 'result', text: 'x'.repeat(100_000), is_main_result: true });
      answer.end();
    };
    const sbx = sandboxAt(ci.url);
    await assert.rejects(sbx.runCode('1', { maxLineChars: 10_000 }), tooLarge(/^a line of the answer passed 10000 characters/));
    assert.equal((await sbx.runCode('1')).text?.length, 100_000, 'the default is unchanged');
  });

  test('a maxLineChars that is not a positive whole number is refused before any request', async () => {
    const before = ci.requests.length;
    await assert.rejects(sandboxAt(ci.url).runCode('1', { maxLineChars: 0 }), (e: unknown) => e instanceof InvalidArgumentError && /^maxLineChars must be/.test((e as Error).message));
    assert.equal(ci.requests.length, before);
  });
});
