import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AuthenticationError, GoneError, RateLimitError, SandboxError, SandboxNotFoundError, TemplateNotFoundError, TimeoutError } from '@svc/sdk';
import { failureText, isUnreachable, ToolFailure } from './results.ts';
import { portUrl } from './tools/url.ts';

test('failures say what to do next', () => {
  assert.match(failureText(new RateLimitError('team quota maxSandboxes reached: the team may hold 2 sandboxes', { status: 429 })),
    /^team quota maxSandboxes reached.*\. A quota or rate limit of your team was reached: kill sandboxes you no longer need \(list_sandboxes/);
  assert.match(failureText(new SandboxNotFoundError('sandbox not found', { status: 404 }), 'sbx-1'), /^no sandbox sbx-1 in your team .*list_sandboxes shows yours/);
  assert.match(failureText(new TemplateNotFoundError('template x not found', { status: 404, code: 130404 })), /template your team has/);
  assert.match(failureText(new GoneError('gone', { status: 410 }), 'sbx-2'), /sandbox sbx-2 was killed or timed out .*create_sandbox/);
  assert.match(failureText(new AuthenticationError('invalid API key', { status: 401 })), /refused the API key/);
  assert.match(failureText(new AuthenticationError('admin only', { status: 403 })), /^not allowed: admin only$/);
  assert.equal(failureText(new ToolFailure('as it is')), 'as it is');
  assert.match(failureText(new TypeError('boom')), /^unexpected failure: boom$/);
});

test('a port\'s URL: the domain the API reports (with its port, or the proxy\'s), the proxy\'s scheme', () => {
  assert.equal(portUrl('http://127.0.0.1:3002', 'localhost:3002', 'sbx', 8000), 'http://8000-sbx.localhost:3002');
  assert.equal(portUrl('https://127.0.0.1:443', 'example.com', 'sbx', 8000), 'https://8000-sbx.example.com');
  assert.equal(portUrl('https://10.0.0.1:8443', 'example.com', 'sbx', 80), 'https://80-sbx.example.com:8443');
  assert.equal(portUrl('http://127.0.0.1:3002', undefined, 'sbx', 1), 'http://1-sbx.localhost:3002');
  assert.equal(portUrl('http://sandboxes.example.org', undefined, 'sbx', 1), 'http://1-sbx.sandboxes.example.org');
});

test('an error\'s text is cut to a bound, and the addresses in it are hidden', () => {
  const huge = failureText(new SandboxError(`POST /execute: ${'A'.repeat(5_000_000)}`));
  assert.ok(huge.length < 8_100, `${huge.length} characters`);
  assert.match(huge, /^\[… the first \d+ characters were cut …\]\nA+$/);
  assert.ok(failureText(new ToolFailure('x'.repeat(100_000))).length < 8_100);
  assert.ok(failureText('y'.repeat(100_000)).length < 8_100);
  const timedOut = new TimeoutError("POST http://10.0.0.7:3002/process.Process/Start: no answer before the request timeout ('requestTimeoutMs')", { code: 'timeout' });
  assert.equal(failureText(timedOut), "timed out: POST <address>/process.Process/Start: no answer before the request timeout ('requestTimeoutMs')");
  const unreachable = new SandboxError('GET http://[fd00::1]:3002/files: cannot connect (ECONNREFUSED)', { code: 'unreachable' });
  assert.equal(isUnreachable(unreachable), true);
  assert.match(failureText(unreachable, 'sbx-9', 'read_file'), /^read_file could not reach sandbox sbx-9: the connection failed .*list_sandboxes shows whether the sandbox still runs$/);
  assert.doesNotMatch(failureText(unreachable, 'sbx-9', 'read_file'), /fd00|3002|ECONNREFUSED/);
});
