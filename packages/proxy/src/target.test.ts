/**
 * Which sandbox a request names (target.ts): ids in lower case whichever way they are named, and
 * a Host naming one issued sandbox with the E2b-Sandbox-* headers naming another sandbox or port
 * refused, while a Host that only looks like a sandbox's (the proxy's own sslip.io name) is not.
 * Which ids are issued ones is common's (ids.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newSandboxId, SvcError } from '@svc/common';
import { requestTarget } from './target.ts';

/** Two ids in the form the master issues ('i' and 19 lower-case letters or digits). */
const VICTIM = 'iabcdefghij012345678';
const ATTACKER = 'izyxwvutsrq987654321';

const target = (host: string | undefined, sandboxIdHeader?: string, sandboxPortHeader?: string) =>
  requestTarget({ host, sandboxIdHeader, sandboxPortHeader }, '/');

test('the id a Host names is matched in lower case, as host names are', () => {
  assert.deepEqual(target(`8000-${VICTIM.toUpperCase()}.sandbox.test:3002`), { sandboxId: VICTIM, port: 8000 });
  assert.deepEqual(target(`8000-${VICTIM}.sandbox.test`), { sandboxId: VICTIM, port: 8000 });
  assert.deepEqual(target(`49983-Sbx_A-1.Example.COM`), { sandboxId: 'sbx_a-1', port: 49983 });
});

test('the E2b-Sandbox-Id header is lower-cased the same way, so one sandbox has one spelling', () => {
  assert.deepEqual(target('localhost:3002', VICTIM.toUpperCase(), '8000'), { sandboxId: VICTIM, port: 8000, byHeaders: true });
  assert.deepEqual(target('localhost:3002', VICTIM), { sandboxId: VICTIM, port: 0, byHeaders: true });
  assert.equal(target('localhost:3002', 'no/slash'), null);
});

test('a Host naming an issued sandbox id and a header naming another is a 400', () => {
  const refused = target(`8000-${VICTIM}.sandbox.test`, ATTACKER, '8000');
  assert.ok(refused instanceof SvcError);
  assert.equal(refused.status, 400);
  assert.match(refused.message, new RegExp(`Host names sandbox ${VICTIM} and the E2b-Sandbox-Id header sandbox ${ATTACKER}`));
  // Spelt in another case, it is still another sandbox; the same sandbox in another case is not.
  assert.ok(target(`8000-${VICTIM.toUpperCase()}.sandbox.test`, ATTACKER) instanceof SvcError);
  assert.deepEqual(target(`49983-${VICTIM}.sandbox.test`, VICTIM.toUpperCase(), '49983'), { sandboxId: VICTIM, port: 49983, byHeaders: true });
});

test('a Host that is not a sandbox host (an IP, a name that only looks like one) leaves the headers to decide', () => {
  for (const host of ['192-168-1-10.sslip.io:3002', '10.0.0.5:3002', 'localhost:3002', 'proxy.example.com', `8000-${VICTIM}x.sandbox.test`, undefined]) {
    assert.deepEqual(target(host, ATTACKER, '8000'), { sandboxId: ATTACKER, port: 8000, byHeaders: true }, String(host));
  }
});

test('a Host naming an issued sandbox on another port than the E2b-Sandbox-Port header is a 400', () => {
  const refused = target(`49983-${VICTIM}.sandbox.test`, VICTIM, '8080');
  assert.ok(refused instanceof SvcError);
  assert.equal(refused.status, 400);
  assert.match(refused.message, new RegExp(`Host names port 49983 of sandbox ${VICTIM} and the E2b-Sandbox-Port header port 8080`));
  // An omitted port header is envd's: it agrees with a Host naming 49983 and no other port.
  const noPort = target(`8080-${VICTIM}.sandbox.test:3002`, VICTIM);
  assert.ok(noPort instanceof SvcError);
  assert.match(noPort.message, /E2b-Sandbox-Port header no port \(envd's, 49983\)/);
  assert.deepEqual(target(`49983-${VICTIM}.sandbox.test`, VICTIM), { sandboxId: VICTIM, port: 0, byHeaders: true });
  // A freshly issued id is compared the same way (the form is common's, not this test's).
  const issued = newSandboxId();
  assert.ok(target(`8000-${issued}.sandbox.test`, issued, '8001') instanceof SvcError);
});

test('a Host naming the headers\' sandbox and port is routed by the headers', () => {
  assert.deepEqual(target(`8080-${VICTIM}.sandbox.test:3002`, VICTIM, '8080'), { sandboxId: VICTIM, port: 8080, byHeaders: true });
  assert.deepEqual(target(`8080-${VICTIM.toUpperCase()}.sandbox.test`, VICTIM, '08080'), { sandboxId: VICTIM, port: 8080, byHeaders: true });
});

test('a Host whose id is not of the issued form leaves the port to the headers too', () => {
  // The proxy's own sslip.io name reads as port 192 of sandbox 168-1-10; a test id like sbxa is no issued one.
  for (const [host, id] of [['192-168-1-10.sslip.io:3002', '168-1-10'], ['49983-sbxa.sandbox.test', 'sbxa'], [`49983-${VICTIM}x.sandbox.test`, `${VICTIM}x`]]) {
    for (const port of ['8080', '49983', undefined]) {
      assert.deepEqual(target(host, id, port), { sandboxId: id, port: port === undefined ? 0 : Number(port), byHeaders: true }, `${host} ${port}`);
    }
  }
});
