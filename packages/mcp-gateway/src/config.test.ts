import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CATALOG, packageSpec } from './catalog.ts';
import { ConfigError } from './config-fields.ts';
import { parseConfig } from './config.ts';

const refused = (text: string, message: RegExp) => assert.throws(() => parseConfig(text), (err: Error) => err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'));

test('a config that is not a JSON object is refused, saying so on one line', () => {
  refused('{nope', /--config is not valid JSON/);
  refused('[1, 2]', /must be a JSON object of MCP servers by name, got an array/);
  refused('"filesystem"', /got a string/);
  refused('null', /got null/);
  assert.deepEqual(parseConfig('{}'), []);
});

test('reference servers: their entries become the program arguments, in config order', () => {
  const specs = parseConfig(JSON.stringify({
    time: { localTimezone: 'Europe/Paris' }, filesystem: { paths: ['/a', '/b'] }, git: {}, memory: {}, sequentialthinking: {}, fetch: { ignoreRobotsTxt: true, userAgent: 'UA' },
  }));
  assert.deepEqual(specs.map((s) => s.name), ['time', 'filesystem', 'git', 'memory', 'sequentialthinking', 'fetch']);
  assert.deepEqual(specs.map((s) => (s.kind === 'reference' ? s.args : null)), [
    ['--local-timezone', 'Europe/Paris'], ['/a', '/b'], [], [], [], ['--user-agent', 'UA', '--ignore-robots-txt'],
  ]);
  assert.deepEqual(parseConfig('{"git":{"paths":["/repo"]}}')[0], { kind: 'reference', name: 'git', args: ['/repo'] });
});

test('a reference entry missing a required field or of the wrong type is refused, naming the server and the field', () => {
  refused('{"filesystem":{}}', /MCP server 'filesystem': 'paths' is required/);
  refused('{"filesystem":{"paths":[]}}', /'filesystem': 'paths' is required/);
  refused('{"filesystem":{"paths":"/tmp"}}', /'filesystem': 'paths' must be a list of non-empty strings/);
  refused('{"memory":null}', /MCP server 'memory': its config must be an object, got null/);
  refused('{"time":[]}', /'time': its config must be an object, got an array/);
  refused('{"fetch":{"ignoreRobotsTxt":"yes"}}', /'fetch': 'ignoreRobotsTxt' must be true or false/);
});

test('an unknown server is refused, naming it and what the gateway runs', () => {
  refused('{"time":{},"nosuch":{}}', /^unknown MCP server 'nosuch': svc's gateway runs filesystem, git, memory, sequentialthinking, time, fetch .*brave.*github\/<owner>\/<repo>/);
  refused('{"github/only-owner":{"runCmd":"x"}}', /a GitHub entry is named 'github\/<owner>\/<repo>'/);
});

test('catalog servers: their fields become the environment the server reads them from', () => {
  const [brave, slack] = parseConfig(JSON.stringify({ brave: { apiKey: 'k1' }, slack: { botToken: 'xoxb', teamId: 'T1', channelIds: ['C1', 'C2'] } }));
  assert.equal(brave.kind, 'catalog');
  assert.deepEqual(brave.kind === 'catalog' && brave.env, { BRAVE_API_KEY: 'k1' });
  assert.deepEqual(slack.kind === 'catalog' && slack.env, { SLACK_BOT_TOKEN: 'xoxb', SLACK_TEAM_ID: 'T1', SLACK_CHANNEL_IDS: 'C1,C2' });
  assert.equal(brave.kind === 'catalog' && packageSpec(brave.server), '@modelcontextprotocol/server-brave-search@0.6.2');
  refused('{"brave":{}}', /MCP server 'brave': 'apiKey' is required \(its BRAVE_API_KEY\)/);
  refused('{"notion":{"internalIntegrationToken":{"a":1}}}', /'notion': 'internalIntegrationToken' must be a string/);
  const [ddg] = parseConfig('{"duckduckgo":{}}');
  assert.equal(ddg.kind === 'catalog' && packageSpec(ddg.server), 'duckduckgo-mcp-server');
});

test('every catalog entry is complete: a required field has its variable, an npm package its pinned version', () => {
  for (const [name, server] of Object.entries(CATALOG)) {
    for (const field of server.required) assert.ok(server.env[field], `${name}.${field} maps to a variable`);
    if (server.registry === 'npm') assert.match(server.version ?? '', /^\d+\.\d+\.\d+$/, name);
    assert.ok(server.bin, name);
  }
});

test('github/<owner>/<repo> entries take runCmd, installCmd and envs', () => {
  assert.deepEqual(parseConfig(JSON.stringify({ 'github/acme/tool': { runCmd: 'node index.js', installCmd: 'npm ci', envs: { A: '1' } } }))[0], {
    kind: 'github', name: 'github/acme/tool', owner: 'acme', repo: 'tool', runCmd: 'node index.js', installCmd: 'npm ci', env: { A: '1' },
  });
  refused('{"github/acme/tool":{}}', /'github\/acme\/tool': 'runCmd' is required/);
  refused('{"github/acme/tool":{"runCmd":"x","envs":{"A":1}}}', /'envs' must be an object of strings/);
});

test('remote entries { url, headers } are proxied; the url must be http(s)', () => {
  assert.deepEqual(parseConfig('{"docs":{"url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer x"}}}')[0], {
    kind: 'remote', name: 'docs', url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' },
  });
  refused('{"docs":{"url":"not a url"}}', /'docs': 'url' is not a URL/);
  refused('{"docs":{"url":"ftp://x/"}}', /'docs': 'url' must be http or https/);
});
