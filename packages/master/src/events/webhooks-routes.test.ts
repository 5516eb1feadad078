/**
 * E2B's lifecycle webhooks over HTTP against a real master (EVENT_ROUTES,
 * packages/contracts/src/events.ts): create, list, read, patch and delete, the 400s of a bad body
 * or a URL that points into the platform, the secret never answered, a team's webhooks kept from
 * every other team, and a delivery end to end, signed as E2B signs it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomId } from '@svc/common';
import { EVENT_LIMITS, WEBHOOK_HEADERS, type SandboxEventType, type WireSandboxEvent, type WireWebhook } from '@svc/contracts/events';
import { startMasterOverFakeNode, type MasterOverFakeNode } from '../testing/master-over-fake-node.ts';
import { assertBadRequest, clientOf, eventually, newSandbox, newTeam, send } from './events-test-support.ts';

const T = (s: string) => `sandbox.lifecycle.${s}` as SandboxEventType;
const WIRE_FIELDS = ['createdAt', 'enabled', 'events', 'id', 'name', 'teamID', 'url'];
/** Every secret the tests give holds it: finding it in an answer is a leak. */
const MARKER = `whsec-${randomId(16)}`;
const secret = (s = '') => `${MARKER}${s}`;

let h: MasterOverFakeNode;
let teamA: string;
let teamB: string;

before(async () => {
  h = await startMasterOverFakeNode(() => {}, { webhookDelivery: { pollMs: 50, retryDelayMs: 100, timeoutMs: 2_000 } });
  teamA = await newTeam(h);
  teamB = await newTeam(h);
});
after(async () => { await h?.close(); });

/** Nothing the master answered holds a signature secret. */
function assertNoSecret(text: string, what: string): void {
  assert.ok(!text.includes(MARKER), `${what} holds the secret: ${text}`);
  assert.ok(!text.includes('signatureSecret'), `${what} names the secret: ${text}`);
}

const newHook = (o: Record<string, unknown> = {}) => ({ name: 'hook', url: 'http://127.0.0.1:9/hook', events: [T('created')], signatureSecret: secret(), ...o });

async function createHook(team: string | undefined, body: Record<string, unknown>): Promise<WireWebhook> {
  const r = await send(h, 'POST', '/events/webhooks', { team, body });
  assert.equal(r.status, 201, r.text);
  assertNoSecret(r.text, 'POST /events/webhooks');
  return r.body as WireWebhook;
}

test('a webhook is made (201, E2B\'s shape, enabled by default), listed and read, never with its secret', async () => {
  const team = await newTeam(h);
  const made = await createHook(team, newHook({ name: 'audit', url: 'http://127.0.0.1:9/in?x=1', events: [T('created'), T('killed')] }));
  assert.deepEqual(Object.keys(made).sort(), WIRE_FIELDS);
  assert.equal(typeof made.id, 'string');
  assert.ok(made.id.length > 0);
  assert.deepEqual([made.teamID, made.name, made.enabled, made.url, made.events], [team, 'audit', true, 'http://127.0.0.1:9/in?x=1', [T('created'), T('killed')]]);
  assert.equal(new Date(made.createdAt).toISOString(), made.createdAt);
  assert.ok(Math.abs(Date.parse(made.createdAt) - Date.now()) < 60_000);

  const off = await createHook(team, newHook({ name: 'off', enabled: false, signatureSecret: secret('-2') }));
  assert.equal(off.enabled, false, 'enabled as given');

  const one = await send(h, 'GET', `/events/webhooks/${made.id}`, { team });
  assert.equal(one.status, 200);
  assertNoSecret(one.text, 'GET one');
  assert.deepEqual(one.body, made);
  const list = await send(h, 'GET', '/events/webhooks', { team });
  assert.equal(list.status, 200);
  assertNoSecret(list.text, 'GET list');
  assert.deepEqual((list.body as WireWebhook[]).map((w) => w.id).sort(), [made.id, off.id].sort());
  assert.deepEqual((list.body as WireWebhook[]).find((w) => w.id === made.id), made);
});

test('a bad new webhook is a 400 with { code, message } naming the problem', async () => {
  const masterPort = new URL(h.master.url).port;
  const cases: Array<[string, unknown, RegExp]> = [
    ['missing name', newHook({ name: undefined }), /^name is required$/],
    ['missing url', newHook({ url: undefined }), /^url is required$/],
    ['missing events', newHook({ events: undefined }), /^events is required$/],
    ['missing signatureSecret', newHook({ signatureSecret: undefined }), /^signatureSecret is required$/],
    ['no body', undefined, /^name is required$|request body/],
    ['an empty name', newHook({ name: '' }), /^name /],
    ['an empty secret', newHook({ signatureSecret: '' }), /^signatureSecret /],
    ['events []', newHook({ events: [] }), /^events /],
    ['an unknown event type', newHook({ events: [T('created'), T('nope')] }), /^events\[1\] must be one of/],
    ['an event twice', newHook({ events: [T('created'), T('created')] }), /^events /],
    ['enabled not a boolean', newHook({ enabled: 'yes' }), /^enabled must be boolean$/],
    ['an extra field', newHook({ colour: 'blue' }), /^colour is not a known field$/],
    ['url ftp://x', newHook({ url: 'ftp://x' }), /url must be http or https/],
    ['url not a url', newHook({ url: 'not a url' }), /url is not a URL/],
    ['url with user:pass@', newHook({ url: 'http://user:pass@127.0.0.1:9/' }), /url must not carry a user or password/],
    ['url the master\'s own address', newHook({ url: h.master.url }), new RegExp(`port ${masterPort} is one of the platform's own components`)],
    ['url a path on the master', newHook({ url: `${h.master.url}/v1/sandboxes` }), /platform's own components/],
    ['url the master by the name localhost', newHook({ url: `http://localhost:${masterPort}/` }), /platform's own components/],
    ['url the node agent', newHook({ url: h.node.url }), /platform's own components/],
    ['url in the sandbox pool', newHook({ url: 'http://10.200.0.5:8080/' }), /10\.200\.0\.5 is in the sandbox address pool/],
  ];
  for (const [what, body, message] of cases) {
    const r = await send(h, 'POST', '/events/webhooks', { team: teamA, ...(body === undefined ? {} : { body }) });
    assertBadRequest(r, message, what);
    assert.ok(!r.text.includes(MARKER), `${what}: the 400 holds the secret`);
  }
  assert.deepEqual((await send(h, 'GET', '/events/webhooks', { team: teamA })).body, [], 'nothing was made');
});

test('a PATCH changes only the fields it gives; {} and a bad field are 400s; the master\'s address is refused', async () => {
  const team = await newTeam(h);
  const made = await createHook(team, newHook({ name: 'first', url: 'http://127.0.0.1:9/a', events: [T('created')] }));
  const patch = async (body: unknown) => send(h, 'PATCH', `/events/webhooks/${made.id}`, { team, body });

  let cur = made;
  const steps: Array<[Record<string, unknown>, Partial<WireWebhook>]> = [
    [{ name: 'second' }, { name: 'second' }],
    [{ enabled: false }, { enabled: false }],
    [{ events: [T('paused'), T('resumed')] }, { events: [T('paused'), T('resumed')] }],
    [{ url: 'http://127.0.0.1:9/b' }, { url: 'http://127.0.0.1:9/b' }],
    [{ signatureSecret: secret('-rotated') }, {}],
    [{ name: 'third', enabled: true }, { name: 'third', enabled: true }],
  ];
  for (const [body, changed] of steps) {
    const r = await patch(body);
    assert.equal(r.status, 200, `${JSON.stringify(body)}: ${r.text}`);
    assertNoSecret(r.text, `PATCH ${Object.keys(body).join(',')}`);
    cur = { ...cur, ...changed };
    assert.deepEqual(r.body, cur, `${JSON.stringify(body)} changes that alone`);
    assert.deepEqual((await send(h, 'GET', `/events/webhooks/${made.id}`, { team })).body, cur);
  }
  assert.equal(cur.createdAt, made.createdAt);

  const bad: Array<[string, unknown, RegExp]> = [
    ['{}', {}, /fewer than 1 properties|request body/],
    ['an extra field', { colour: 'red' }, /^colour is not a known field$/],
    ['events []', { events: [] }, /^events /],
    ['an unknown event type', { events: [T('nope')] }, /^events\[0\] must be one of/],
    ['an empty name', { name: '' }, /^name /],
    ['url ftp', { url: 'ftp://x' }, /url must be http or https/],
    ['url with user:pass@', { url: 'http://a:b@127.0.0.1:9/' }, /url must not carry a user or password/],
    ['url the master\'s own address', { url: h.master.url }, /platform's own components/],
    ['url in the sandbox pool', { url: 'http://10.200.0.5:8080/' }, /sandbox address pool/],
  ];
  for (const [what, body, message] of bad) assertBadRequest(await patch(body), message, `PATCH ${what}`);
  assert.deepEqual((await send(h, 'GET', `/events/webhooks/${made.id}`, { team })).body, cur, 'a refused PATCH changed nothing');
  assert.equal((await send(h, 'PATCH', '/events/webhooks/no-such-webhook', { team, body: { name: 'x' } })).status, 404);
});

test('a DELETE is a 200; then GET and DELETE are 404s', async () => {
  const team = await newTeam(h);
  const made = await createHook(team, newHook());
  const kept = await createHook(team, newHook({ name: 'kept' }));
  const del = await send(h, 'DELETE', `/events/webhooks/${made.id}`, { team });
  assert.equal(del.status, 200, del.text);
  assert.equal((await send(h, 'GET', `/events/webhooks/${made.id}`, { team })).status, 404);
  assert.equal((await send(h, 'DELETE', `/events/webhooks/${made.id}`, { team })).status, 404);
  assert.equal((await send(h, 'PATCH', `/events/webhooks/${made.id}`, { team, body: { name: 'x' } })).status, 404);
  assert.deepEqual((await send(h, 'GET', '/events/webhooks', { team })).body, [kept]);
});

test('another team\'s webhook is a 404 to GET, PATCH and DELETE, and is in no other team\'s list', async () => {
  const mine = await createHook(teamA, newHook({ name: 'team-a' }));
  const before = (await send(h, 'GET', '/events/webhooks', { team: teamA })).body as WireWebhook[];
  for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'taken-over', url: 'http://127.0.0.1:9/b-team' }], ['DELETE', undefined]] as const) {
    const r = await send(h, method, `/events/webhooks/${mine.id}`, { team: teamB, ...(body ? { body } : {}) });
    assert.equal(r.status, 404, `${method}: ${r.text}`);
    assert.ok(!r.text.includes(teamA), `${method}'s 404 names no other team`);
  }
  assert.deepEqual((await send(h, 'GET', '/events/webhooks', { team: teamB })).body, [], 'B lists none of A\'s');
  assert.deepEqual((await send(h, 'GET', `/events/webhooks/${mine.id}`, { team: teamA })).body, mine, 'B\'s PATCH and DELETE changed nothing');
  assert.deepEqual((await send(h, 'GET', '/events/webhooks', { team: teamA })).body, before);
  // No header is the default team: not A either.
  assert.equal((await send(h, 'GET', `/events/webhooks/${mine.id}`)).status, 404);
  assert.ok(!((await send(h, 'GET', '/events/webhooks')).body as WireWebhook[]).some((w) => w.id === mine.id));
  const theirs = await createHook(teamB, newHook({ name: 'team-b' }));
  assert.equal(theirs.teamID, teamB);
  assert.equal((await send(h, 'GET', `/events/webhooks/${theirs.id}`, { team: teamA })).status, 404);
});

test(`a team may have ${EVENT_LIMITS.webhooksPerTeam} webhooks; one more is a 409`, async () => {
  const team = await newTeam(h);
  for (let i = 0; i < EVENT_LIMITS.webhooksPerTeam; i++) await createHook(team, newHook({ name: `h${i}` }));
  const over = await send(h, 'POST', '/events/webhooks', { team, body: newHook({ name: 'one-more' }) });
  assert.equal(over.status, 409, over.text);
  assert.equal((await send(h, 'GET', '/events/webhooks', { team })).body.length, EVENT_LIMITS.webhooksPerTeam);
  assert.equal((await send(h, 'POST', '/events/webhooks', { team: teamB, body: newHook({ name: 'another-team' }) })).status, 201, 'another team\'s count is its own');
});

interface Received {
  headers: http.IncomingHttpHeaders;
  raw: string;
}

/** E2B's documented check of a delivery: base64 of sha256(secret + raw body), made URL-safe, unpadded. */
function e2bVerify(secretText: string, raw: string, signature: string): boolean {
  const expected = createHash('sha256').update(secretText + raw).digest('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  return expected === signature;
}

test('a delivery end to end: the subscribed events are POSTed, signed as E2B signs them; lastDelivery says delivered', async () => {
  const got: Received[] = [];
  const receiver = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { raw += c; });
    req.on('end', () => {
      got.push({ headers: req.headers, raw });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/e2b`;
    const team = await newTeam(h);
    const key = secret(`-${randomId(12)}`);
    const hook = await createHook(team, { name: 'receiver', url, events: [T('created'), T('killed')], signatureSecret: key });
    // Neither of these is sent anything: one is disabled, the other wants a type that does not happen.
    const disabled = await createHook(team, newHook({ name: 'disabled', url, enabled: false, events: [T('created'), T('killed')], signatureSecret: secret('-off') }));
    const pausedOnly = await createHook(team, newHook({ name: 'paused-only', url, events: [T('paused')], signatureSecret: secret('-p') }));

    const id = await newSandbox(h, team);
    await clientOf(h, team).killSandbox(id);
    await eventually('two deliveries', () => got.length >= 2);
    // The other team's sandbox is nothing to this team's webhook.
    await newSandbox(h, teamB);

    const listed = (await send(h, 'GET', `/events/sandboxes/${id}?orderAsc=true`, { team })).body as WireSandboxEvent[];
    assert.deepEqual(listed.map((e) => e.type), [T('created'), T('killed')]);
    const bodies = got.map((g) => JSON.parse(g.raw) as WireSandboxEvent).sort((a, b) => a.id.localeCompare(b.id));
    assert.deepEqual(bodies, listed, 'each delivery is the event as the events API lists it');
    for (const g of got) {
      assert.equal(g.headers['content-type'], 'application/json');
      assert.equal(g.headers[WEBHOOK_HEADERS.webhookId], hook.id, 'e2b-webhook-id is the webhook');
      assert.equal(typeof g.headers[WEBHOOK_HEADERS.deliveryId], 'string');
      assert.equal(g.headers[WEBHOOK_HEADERS.signatureVersion], 'v1');
      const signature = g.headers[WEBHOOK_HEADERS.signature];
      assert.equal(typeof signature, 'string');
      assert.ok(e2bVerify(key, g.raw, signature as string), 'E2B\'s check of e2b-signature holds');
      assert.ok(!e2bVerify(secret('-off'), g.raw, signature as string), 'another secret does not verify');
    }
    assert.notEqual(got[0]!.headers[WEBHOOK_HEADERS.deliveryId], got[1]!.headers[WEBHOOK_HEADERS.deliveryId]);

    await eventually('lastDelivery recorded', async () => (await send(h, 'GET', `/events/webhooks/${hook.id}`, { team })).body.lastDelivery !== undefined);
    const after = await send(h, 'GET', `/events/webhooks/${hook.id}`, { team });
    assertNoSecret(after.text, 'GET one after delivery');
    const last = (after.body as WireWebhook).lastDelivery!;
    assert.equal(last.outcome, 'delivered');
    assert.equal(last.status, 200);
    assert.ok(listed.some((e) => e.id === last.eventId), 'lastDelivery names a delivered event');
    assert.equal(new Date(last.at).toISOString(), last.at);
    assert.equal(last.error, undefined);

    await new Promise((r) => setTimeout(r, 300));
    assert.equal(got.length, 2, 'nothing more: not the disabled hook, not the paused-only hook, not the other team\'s sandbox');
    for (const quiet of [disabled, pausedOnly]) {
      assert.equal(((await send(h, 'GET', `/events/webhooks/${quiet.id}`, { team })).body as WireWebhook).lastDelivery, undefined, quiet.name);
    }
  } finally {
    await new Promise<void>((r) => receiver.close(() => r()));
  }
});

// Addresses that reach the master's own 127.0.0.1 listener by another spelling: 0.0.0.0 (this host,
// on Linux) and an IPv4-mapped IPv6 address, which WHATWG URL writes in hex ([::ffff:7f00:1]). Before
// the check knew them, a team could point a webhook at the master's operator routes and kill another
// team's sandboxes.
test('a webhook URL reaching the master by 0.0.0.0 or an IPv4-mapped IPv6 address, or the pool by the latter, is a 400', async () => {
  const port = new URL(h.master.url).port;
  const urls = [
    `http://0.0.0.0:${port}/v1/sandboxes`,
    `http://[::ffff:127.0.0.1]:${port}/v1/sandboxes`,
    `http://[::ffff:7f00:1]:${port}/v1/sandboxes`,
    'http://[::ffff:10.200.0.5]:8080/',
  ];
  const accepted: string[] = [];
  for (const url of urls) {
    const r = await send(h, 'POST', '/events/webhooks', { team: teamB, body: newHook({ name: 'ssrf', url }) });
    if (r.status !== 400) accepted.push(`${url} → ${r.status}`);
    if (r.status === 201) await send(h, 'DELETE', `/events/webhooks/${(r.body as WireWebhook).id}`, { team: teamB });
  }
  assert.deepEqual(accepted, [], 'each of these is the platform\'s own endpoint or the sandbox pool');
});
