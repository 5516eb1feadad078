/**
 * Turns a route of the catalog into concrete requests: a baseline, a hostile value for every
 * path parameter, query key and body field, random combinations, bad credentials, malformed
 * and oversized bodies, odd content types and wrong methods.
 */
import { TRAFFIC_TOKEN_HEADERS } from '@svc/contracts/proxy-admin';
import { badCredentials, contentTypeOf, ENVD_PORT, goodCredentials } from './credentials.ts';
import { brokenEnvelopes, envelope, MALFORMED_JSON, multipart, ODD_CONTENT_TYPES, oversizeBody } from './bodies.ts';
import { clone, fieldPaths, getAt, randomMutation, setAt } from './mutate.ts';
import type { Rng } from './random.ts';
import type { Known } from './routes.ts';
import type { AuthKind, Case, Component, ParamKind, RouteSpec } from './spec.ts';
import { extremeSameType, jsonText, KB, nastyQueryValue, nastySegment, nastyString, wrongTypeValue, type Json } from './values.ts';

export interface Ports {
  api: number;
  master: number;
  nodeAgent: number;
  proxyData: number;
  proxyAdmin: number;
  lifecycle: number[];
  templateCenter: number;
}

interface Draft {
  method: string;
  params: Record<string, string>;
  query: string;
  headers: Record<string, string>;
  body?: Buffer;
  note: string;
  port?: number;
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

export class CaseBuilder {
  private nextId = 0;

  constructor(private readonly k: Known, private readonly ports: Ports) {}

  forRoute(spec: RouteSpec, rng: Rng): Case[] {
    const out: Case[] = [];
    const label = `${spec.method} ${spec.path}`;
    const base = (): Draft => ({
      method: spec.method,
      params: Object.fromEntries(Object.entries(spec.params ?? {}).map(([n, kind]) => [n, encodeURIComponent(this.saneParam(kind, rng))])),
      query: encodeQuery(spec.query ?? {}),
      headers: { ...goodCredentials(this.k, spec, rng), ...(spec.body !== undefined && !spec.upload ? { 'content-type': contentTypeOf(spec) } : {}) },
      body: spec.body === undefined ? undefined : this.bodyOf(spec, spec.body),
      note: 'baseline',
    });
    const add = (d: Draft) => out.push(this.finish(spec, label, d));
    let liveLeft = spec.live?.cases ?? 0;
    const liveBody = (): Json | undefined => {
      if (!spec.live || liveLeft <= 0 || spec.body === undefined) return undefined;
      liveLeft--;
      return { ...(spec.body as Record<string, Json>), ...spec.live.patch };
    };

    const first = base();
    const lb = liveBody();
    if (lb) { first.body = this.bodyOf(spec, lb); first.note = 'baseline, real create'; }
    add(first);

    for (const name of Object.keys(spec.params ?? {})) {
      for (let i = 0; i < 2; i++) {
        const d = base();
        d.params[name] = nastySegment(rng);
        d.note = `param ${name}=${short(d.params[name])}`;
        add(d);
      }
    }

    if (spec.query) {
      for (const key of Object.keys(spec.query)) {
        const d = base();
        d.query = replaceQuery(spec.query, key, nastyQueryValue(rng));
        d.note = `query ${key} hostile`;
        add(d);
      }
      add({ ...base(), query: `${encodeQuery(spec.query)}&${encodeQuery(spec.query)}`, note: 'every query key twice' });
      add({ ...base(), query: '', note: 'no query' });
      add({ ...base(), query: `${encodeQuery(spec.query)}&__proto__[x]=1&constructor=1&a[b][c]=d&=&&%`, note: 'unknown and odd query keys' });
    }

    if (spec.body !== undefined && !spec.upload) {
      for (const p of fieldPaths(spec.body)) {
        const d = base();
        d.body = this.bodyOf(spec, setAt(spec.body, p, wrongTypeValue(rng, getAt(spec.body, p))));
        d.note = `wrong type at ${p.join('.')}`;
        add(d);
        if (rng.chance(0.5)) {
          const e = base();
          e.body = this.bodyOf(spec, setAt(spec.body, p, extremeSameType(rng, getAt(spec.body, p) as Json)));
          e.note = `extreme value at ${p.join('.')}`;
          add(e);
        }
        if (rng.chance(0.25)) add({ ...base(), body: this.bodyOf(spec, setAt(spec.body, p, undefined)), note: `missing ${p.join('.')}` });
      }
    }

    if (spec.upload) for (const d of this.uploadDrafts(base, rng)) add(d);

    const randomCount = spec.random ?? (spec.body !== undefined || spec.params ? 8 : 3);
    for (let i = 0; i < randomCount; i++) {
      const d = base();
      const notes: string[] = [];
      if (spec.body !== undefined && !spec.upload) {
        const live = liveBody();
        const m = randomMutation(rng, clone(live ?? spec.body));
        d.body = this.bodyOf(spec, m.body);
        notes.push(live ? `${m.note}, real create` : m.note);
      }
      for (const name of Object.keys(spec.params ?? {})) {
        if (rng.chance(0.3)) { d.params[name] = nastySegment(rng); notes.push(`param ${name}=${short(d.params[name])}`); }
      }
      if (spec.query && rng.chance(0.3)) {
        const key = rng.pick(Object.keys(spec.query));
        d.query = replaceQuery(spec.query, key, nastyQueryValue(rng));
        notes.push(`query ${key} hostile`);
      }
      if (rng.chance(0.3)) Object.assign(d.headers, oddHeaders(rng, notes));
      if (spec.connect && rng.chance(0.4)) Object.assign(d.headers, connectHeaders(rng, notes));
      d.note = notes.join('; ') || 'random headers';
      add(d);
    }

    for (const bad of badCredentials(this.k, spec, rng)) add({ ...base(), ...bad });

    if (spec.body !== undefined && !spec.upload) {
      for (let i = 0; i < 2; i++) {
        const body = spec.connect && spec.connect !== 'unary' ? brokenEnvelopes(rng, Buffer.from(jsonText(spec.body))) : { body: rng.pick(MALFORMED_JSON), note: 'malformed JSON' };
        add({ ...base(), body: body.body, note: body.note });
      }
      const ct = rng.pick(ODD_CONTENT_TYPES);
      const d = base();
      if (ct === undefined) delete d.headers['content-type'];
      else d.headers['content-type'] = ct;
      d.note = `content-type ${JSON.stringify(ct)}`;
      add(d);
      add({ ...base(), body: Buffer.alloc(0), note: 'empty body' });
      add({ ...base(), body: Buffer.from('null'), note: 'null body' });
      if (spec.bodyLimit && rng.chance(0.5)) {
        const o = oversizeBody(rng, spec.body, spec.bodyLimit);
        add({ ...base(), body: o.body, note: o.note });
      }
    } else if (!spec.upload && spec.method !== 'HEAD') {
      add({ ...base(), headers: { ...base().headers, 'content-type': 'application/json' }, body: Buffer.from(jsonText({ unexpected: nastyString(rng, false) })), note: 'a body the route does not read' });
      add({ ...base(), headers: { ...base().headers, 'content-type': 'application/json' }, body: rng.pick(MALFORMED_JSON), note: 'malformed body the route does not read' });
    }

    const other = rng.pick(METHODS.filter((m) => m !== spec.method));
    add({ ...base(), method: other, note: `method ${other}` });
    return out;
  }

  /** The data-plane proxy's own job: finding the sandbox (Host, E2b-Sandbox-* headers) and gating it. */
  proxyDataCases(rng: Rng, count: number): Case[] {
    const k = this.k;
    const out: Case[] = [];
    const ids = [k.running, k.private, k.killed, `fuzz${rng.alnum(16)}`, 'x'.repeat(64), 'x'.repeat(65), '', '-', 'a.b', 'ünï', '..', '%2e%2e'];
    const ports = ['49983', '1', '0', '65535', '65536', '99999', '8080', '22', '-1', 'abc', '00080', '049983', ''];
    for (let i = 0; i < count; i++) {
      const headers: Record<string, string> = {};
      const notes: string[] = [];
      const id = rng.pick(ids);
      const port = rng.chance(0.5) ? '49983' : rng.pick(ports);
      const how = rng.int(0, 5);
      if (how <= 2) {
        const host = rng.pick([`${port}-${id}.${k.domain}`, `${port}-${id}`, `${port}-${id}:${this.ports.proxyData}`, `-${id}.${k.domain}`, `${port}-.${k.domain}`, k.domain, '127.0.0.1', `${port}-${id}.${k.domain}.evil.example`, `${port}--${id}.x`]);
        headers.host = latin1(host);
        notes.push(`host ${short(host)}`);
      } else if (how <= 4) {
        headers['e2b-sandbox-id'] = latin1(id);
        if (rng.chance(0.8)) headers['e2b-sandbox-port'] = port;
        notes.push(`e2b headers ${short(id)}:${port}`);
      } else {
        headers.host = `49983-${k.running}.${k.domain}`;
        headers['e2b-sandbox-id'] = latin1(rng.pick(ids));
        headers['e2b-sandbox-port'] = rng.pick(ports);
        notes.push('host and e2b headers disagree');
      }
      if (rng.chance(0.5)) {
        const token = rng.pick([k.trafficToken, 'wrong', '', k.trafficToken + 'x', 'x'.repeat(10 * KB), k.envdToken]);
        headers[rng.pick(TRAFFIC_TOKEN_HEADERS)] = token;
        notes.push(`traffic token ${token === k.trafficToken ? 'right' : 'wrong'}`);
      }
      if (rng.chance(0.3)) headers['x-access-token'] = k.envdToken;
      if (rng.chance(0.2)) Object.assign(headers, oddHeaders(rng, notes));
      if (rng.chance(0.1)) { headers.connection = 'Upgrade'; headers.upgrade = 'websocket'; headers['sec-websocket-key'] = 'dGhlIHNhbXBsZSBub25jZQ=='; headers['sec-websocket-version'] = '13'; notes.push('websocket upgrade'); }
      const method = rng.pick(['GET', 'GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH']);
      const path = rng.pick(['/health', '/', '/envs', '/files?path=%2Fetc%2Fhostname', `/${nastySegment(rng)}`, '/process.Process/List', '/%2e%2e/%2e%2e/admin/healthz']);
      let body: Buffer | undefined;
      if (method !== 'GET' && method !== 'HEAD' && rng.chance(0.5)) {
        body = rng.chance(0.8) ? Buffer.from('{}') : Buffer.alloc(2 * 1024 * 1024, 0x61);
        headers['content-type'] = 'application/json';
        if (body.length > 2) notes.push('2 MB body');
        if (rng.chance(0.3)) { headers['transfer-encoding'] = 'chunked'; notes.push('chunked'); }
      }
      if (body !== undefined && headers['transfer-encoding'] === undefined) headers['content-length'] = String(body.length);
      out.push({
        id: this.nextId++, component: 'proxy-data', route: 'addressing and gating', method, path, headers, body,
        note: notes.join('; '), port: this.ports.proxyData, connectErrors: path === '/process.Process/List',
      });
    }
    return out;
  }

  /** Malformed HTTP on a socket: every server must answer 4xx (or close), not hang or crash. */
  rawCases(): Case[] {
    const servers: [Component, number][] = [
      ['api', this.ports.api], ['master', this.ports.master], ['node-agent', this.ports.nodeAgent], ['proxy-data', this.ports.proxyData],
      ['proxy-admin', this.ports.proxyAdmin], ['lifecycle', this.ports.lifecycle[0]], ['template-center', this.ports.templateCenter],
    ];
    const requests: [string, Buffer][] = [
      ['garbage request line', Buffer.from('BLAH\r\n\r\n')],
      ['NUL in a header', Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n', 'latin1')],
      ['Content-Length and Transfer-Encoding', Buffer.from('POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')],
      ['negative Content-Length', Buffer.from('POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n')],
      ['header over 16 KB', Buffer.from(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * KB)}\r\n\r\n`)],
      ['HTTP/2 preface on HTTP/1', Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')],
    ];
    return servers.flatMap(([component, port]) => requests.map(([note, raw]) => ({
      id: this.nextId++, component, route: 'malformed HTTP', method: 'RAW', path: '', headers: {}, note, port, raw,
    })));
  }

  // ---------------------------------------------------------------- parts

  private finish(spec: RouteSpec, label: string, d: Draft): Case {
    let path = spec.path.replace(/:(\w+)/g, (_, n: string) => d.params[n] ?? '');
    if (d.query) path += `?${d.query}`;
    const headers = { ...d.headers };
    // Framed explicitly: node sends a GET's or DELETE's body without any framing otherwise.
    if (d.body !== undefined && headers['transfer-encoding'] === undefined) headers['content-length'] = String(d.body.length);
    return {
      id: this.nextId++, component: spec.component, route: label, method: d.method, path, headers, body: d.body, note: d.note,
      port: d.port ?? this.portOf(spec.component, this.nextId),
      stream: spec.connect === 'server-stream' || spec.connect === 'client-stream',
      connectErrors: spec.connect !== undefined,
    };
  }

  private portOf(c: Component, n: number): number {
    switch (c) {
      case 'api': return this.ports.api;
      case 'master': return this.ports.master;
      case 'node-agent': return this.ports.nodeAgent;
      case 'proxy-admin': return this.ports.proxyAdmin;
      case 'lifecycle': return this.ports.lifecycle[n % this.ports.lifecycle.length];
      case 'template-center': return this.ports.templateCenter;
      case 'proxy-data':
      case 'envd': return this.ports.proxyData;
    }
  }

  private saneParam(kind: ParamKind, rng: Rng): string {
    const missing = `fuzz${rng.alnum(16)}`;
    switch (kind) {
      case 'sandbox': return rng.pick([this.k.running, this.k.running, this.k.private, this.k.killed, missing]);
      case 'deadSandbox': return rng.pick([this.k.killed, missing]);
      case 'node': return rng.chance(0.7) ? this.k.nodeId : missing;
      case 'bogus': return missing;
    }
  }

  private bodyOf(spec: RouteSpec, body: Json): Buffer {
    const text = Buffer.from(jsonText(body));
    return spec.connect === 'server-stream' || spec.connect === 'client-stream' ? envelope(text) : text;
  }

  private uploadDrafts(base: () => Draft, rng: Rng): Draft[] {
    const content = Buffer.from('fuzz upload\n');
    const b = 'fuzzboundary';
    const mk = (headers: Record<string, string>, body: Buffer, note: string, query?: string): Draft => {
      const d = base();
      return { ...d, headers: { ...d.headers, ...headers }, body, note, query: query ?? d.query };
    };
    const form = (parts: Parameters<typeof multipart>[1]) => multipart(b, parts);
    const mp = { 'content-type': `multipart/form-data; boundary=${b}` };
    const drafts = [
      mk(mp, form([{ name: 'file', filename: 'a.txt', content }]), 'multipart upload'),
      mk({ 'content-type': 'application/octet-stream' }, content, 'raw upload'),
      mk({ 'content-type': 'application/octet-stream' }, content, 'raw upload without path', 'username=user'),
      mk(mp, form([{ name: 'file', content }]), 'part without filename, no path', ''),
      mk(mp, form([{ name: 'file', filename: '../../../../etc/evil', content }]), 'traversal filename, no path', ''),
      mk(mp, form([{ name: 'file', filename: 'a', content }, { name: 'file', filename: 'a', content }]), 'same path twice'),
      mk(mp, form([{ name: 'other', content }]), 'no file part'),
      mk({ 'content-type': 'multipart/form-data' }, form([{ name: 'file', filename: 'a', content }]), 'multipart without boundary'),
      mk({ 'content-type': 'multipart/form-data; boundary=wrong' }, form([{ name: 'file', filename: 'a', content }]), 'wrong boundary'),
      mk(mp, form([{ name: 'file', filename: 'a', content }]).subarray(0, 60), 'truncated multipart'),
      mk({ 'content-type': 'text/plain' }, content, 'text/plain upload'),
      mk({ 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' }, content, 'gzip encoding, not gzip'),
      mk(mp, form([{ name: 'file', filename: 'a', content, headers: `Content-Type: ${'x'.repeat(10 * KB)}\r\n` }]), '10 KB part header'),
    ];
    for (let i = 0; i < 6; i++) {
      const d = base();
      d.headers['content-type'] = 'application/octet-stream';
      d.body = content;
      d.query = `path=${nastyQueryValue(rng)}&username=${rng.chance(0.5) ? 'user' : nastyQueryValue(rng)}`;
      d.note = 'hostile upload path or user';
      drafts.push(d);
    }
    return drafts;
  }
}

function encodeQuery(q: Record<string, string>): string {
  return Object.entries(q).map(([key, v]) => `${encodeURIComponent(key)}=${encodeURIComponent(v)}`).join('&');
}

function replaceQuery(q: Record<string, string>, key: string, encodedValue: string): string {
  return Object.entries(q).map(([n, v]) => `${encodeURIComponent(n)}=${n === key ? encodedValue : encodeURIComponent(v)}`).join('&');
}

/** Headers a client might send that nobody thought about. */
function oddHeaders(rng: Rng, notes: string[]): Record<string, string> {
  const pick = rng.int(0, 7);
  notes.push(`odd header #${pick}`);
  switch (pick) {
    case 0: return { range: 'bytes=999999999999-0' };
    case 1: return { 'accept-encoding': 'gzip;q=abc, br, *;q=-1' };
    case 2: return { 'x-forwarded-for': '1.2.3.4, <script>', 'x-forwarded-host': 'evil.example' };
    case 3: return { expect: '100-continue' };
    case 4: return { 'if-none-match': '*', 'if-modified-since': 'yesterday' };
    case 5: return { 'x-big': 'h'.repeat(8 * KB) };
    case 6: return { 'content-encoding': 'gzip' };
    default: return { accept: 'application/xml', 'accept-language': '\u00ff' };
  }
}

function connectHeaders(rng: Rng, notes: string[]): Record<string, string> {
  const h = rng.pick<[string, Record<string, string>]>([
    ['protocol version 2', { 'connect-protocol-version': '2' }],
    ['timeout -1', { 'connect-timeout-ms': '-1' }],
    ['timeout huge', { 'connect-timeout-ms': '99999999999' }],
    ['timeout 1 ms', { 'connect-timeout-ms': '1' }],
    ['gzip that is not', { 'content-encoding': 'gzip', 'connect-content-encoding': 'gzip' }],
    ['unknown encoding', { 'connect-content-encoding': 'br' }],
    ['proto codec', { 'content-type': 'application/proto' }],
  ]);
  notes.push(`connect: ${h[0]}`);
  return h[1];
}

/** Header values must be latin1 on the wire; anything else is sent as its UTF-8 bytes. */
function latin1(s: string): string {
  return Buffer.from(s, 'utf8').toString('latin1');
}

function short(s: string): string {
  return s.length > 40 ? `${s.slice(0, 20)}…(${s.length} chars)` : s;
}
