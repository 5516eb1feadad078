/** Sends one case with its own deadline and reports what came back (or that nothing did). */
import { request } from 'node:http';
import { connect } from 'node:net';
import type { Case } from './spec.ts';

export interface Outcome {
  /** Absent when no response arrived. */
  status?: number;
  headers: Record<string, string | string[] | undefined>;
  /** The first MAX_BODY bytes. */
  body: Buffer;
  ms: number;
  /** 'deadline' when the server did not answer in time, else the socket error code. */
  error?: string;
}

export const DEADLINE_MS = 10_000;
export const CLIENT_REFUSED = 'client refused the request';
const MAX_BODY = 256 * 1024;
/** A streaming answer (Connect server stream) is read this long, then dropped. */
const STREAM_READ_MS = 1_500;

export function send(c: Case, deadlineMs = DEADLINE_MS): Promise<Outcome> {
  return c.raw ? sendRaw(c, deadlineMs) : sendHttp(c, deadlineMs);
}

function sendHttp(c: Case, deadlineMs: number): Promise<Outcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    let done = false;
    let status: number | undefined;
    let headers: Outcome['headers'] = {};
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ status, headers, body: Buffer.concat(chunks), ms: Date.now() - started, ...(status === undefined && error ? { error } : {}) });
    };
    let req: ReturnType<typeof request>;
    try {
      req = request({ host: '127.0.0.1', port: c.port, method: c.method, path: c.path, headers: c.headers, agent: false });
    } catch (err) {
      // node's client refused the case itself: a bug of the fuzzer, reported as such
      resolve({ headers: {}, body: Buffer.alloc(0), ms: 0, error: `${CLIENT_REFUSED}: ${(err as Error).message}` });
      return;
    }
    const timer = setTimeout(() => finish('deadline'), deadlineMs);
    req.on('response', (res) => {
      status = res.statusCode;
      headers = res.headers;
      if (c.stream) setTimeout(() => finish(), STREAM_READ_MS).unref();
      res.on('data', (d: Buffer) => {
        if (size < MAX_BODY) chunks.push(d);
        size += d.length;
        if (size >= MAX_BODY) finish();
      });
      res.on('end', () => finish());
      res.on('error', () => finish());
    });
    req.on('upgrade', (res, socket) => {
      status = res.statusCode;
      headers = res.headers;
      socket.destroy();
      finish();
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      // An early answer (413 before the whole body was written) still counts.
      if (status !== undefined) return;
      finish(err.code ?? err.message);
    });
    if (c.body !== undefined) req.end(c.body);
    else req.end();
  });
}

function sendRaw(c: Case, deadlineMs: number): Promise<Outcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settle: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (error?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(settle);
      socket.destroy();
      const text = Buffer.concat(chunks);
      const head = text.toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      const split = head.indexOf('\r\n\r\n');
      const headers: Record<string, string> = {};
      for (const line of head.slice(0, split < 0 ? head.length : split).split('\r\n').slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({
        status: m ? Number(m[1]) : undefined, headers, body: split < 0 ? Buffer.alloc(0) : text.subarray(split + 4),
        ms: Date.now() - started, ...(m ? {} : { error: error ?? (chunks.length ? 'not HTTP' : 'closed without an answer') }),
      });
    };
    const timer = setTimeout(() => finish('deadline'), deadlineMs);
    const socket = connect({ host: '127.0.0.1', port: c.port });
    socket.on('connect', () => socket.write(c.raw!));
    // The answer to a bad request comes in one piece; a kept-alive socket is not waited on.
    socket.on('data', (d: Buffer) => { chunks.push(d); clearTimeout(settle); settle = setTimeout(() => finish(), 300); });
    socket.on('end', () => finish());
    socket.on('close', () => finish());
    socket.on('error', (err: NodeJS.ErrnoException) => finish(err.code));
  });
}
