/**
 * PlaceholderResolver.fill: vault values and workload tokens put into injected headers, and
 * refused (PlaceholderError 403, naming the secret but never its value) when a header cannot
 * carry them: a head is written as latin1, where U+010D U+010A are CR LF.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import { PlaceholderError, PlaceholderResolver, type PlaceholderSources } from './placeholders.ts';

const policy: SandboxEgressPolicy = { sandboxId: 'sbx-1', teamId: 'team-1', address: '10.0.0.2', rules: [] };
const SMUGGLE = 'zq9\u010D\u010AContent-Length: 70\u010D\u010A\u010D\u010APOST /capture HTTP/1.1';

function resolver(values: Record<string, string>, token = 'eyJ.jwt.sig'): PlaceholderResolver {
  const sources: PlaceholderSources = {
    secrets: { resolve: async (_team, names) => ({ values: Object.fromEntries(names.map((n) => [n, values[n]!])), missing: names.filter((n) => !(n in values)) }) },
    tokens: { mint: async () => ({ token, expiresAt: Math.floor(Date.now() / 1000) + 3600 }) },
  };
  return new PlaceholderResolver(sources);
}

const refusedWith = (pattern: RegExp) => (err: unknown) => {
  assert.ok(err instanceof PlaceholderError, String(err));
  assert.equal(err.status, 403);
  assert.match(err.message, pattern);
  assert.equal(err.message.includes('zq9'), false, 'the message never holds the value');
  return true;
};

test('a vault value fills its placeholder', async () => {
  const out = await resolver({ KEY: 'sk-123 caf\u00e9' }).fill(policy, [{ name: 'Authorization', value: 'Bearer ${e2b.secrets.KEY}' }]);
  assert.deepEqual(out, [{ name: 'Authorization', value: 'Bearer sk-123 caf\u00e9' }]);
});

test('a vault value a header cannot carry (past U+00FF, or a control character) fails the request, naming the secret', async () => {
  await assert.rejects(resolver({ KEY: SMUGGLE }).fill(policy, [{ name: 'X-Api-Key', value: '${e2b.secrets.KEY}' }]),
    refusedWith(/^the secret KEY of the sandbox's team of the injected header X-Api-Key holds a character past Latin-1 \(U\+00FF\) at index 3/));
  await assert.rejects(resolver({ KEY: 'zq9\r\nX-Evil: 1' }).fill(policy, [{ name: 'X-Api-Key', value: 'Bearer ${e2b.secrets.KEY}' }]),
    refusedWith(/secret KEY .* holds a control character/));
});

test('a workload token a header cannot carry fails the request, naming the token', async () => {
  await assert.rejects(resolver({}, SMUGGLE).fill(policy, [{ name: 'Authorization', value: 'Bearer ${e2b.identity.tokens.aws}' }]),
    refusedWith(/^the workload token aws of the injected header Authorization holds a character past Latin-1/));
});

test('a filled value is checked whole: a format around the placeholder is part of it', async () => {
  await assert.rejects(resolver({ KEY: 'abc' }).fill(policy, [{ name: 'X-A', value: 'zq9\u010A${e2b.secrets.KEY}' }]),
    refusedWith(/^the value of the injected header X-A holds a character past Latin-1/));
});
