import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { DescMessage, DescMethod, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import type { GenService, GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import { decodedBody, giveUpOnBody, gunzipMessage, readAll } from './body.ts';
import { ConnectError, httpStatusOf, toConnectError } from './code.ts';
import { jsonCodec, protoCodec, type Codec } from './codec.ts';
import { FLAG_COMPRESSED, FLAG_END_STREAM, readEnvelopes, type Envelope } from './envelope.ts';
import { ResponseStream } from './response-stream.ts';

export interface CallContext {
  readonly method: DescMethod;
  readonly requestHeaders: IncomingHttpHeaders;
  /** Aborted when the client goes away or the deadline passes; `reason` is a ConnectError. */
  readonly signal: AbortSignal;
  /** What the client asked for in Connect-Timeout-Ms, if anything. */
  readonly timeoutMs: number | undefined;
}

type In<M> = M extends { input: infer I extends DescMessage } ? MessageShape<I> : never;
type Out<M> = M extends { output: infer O extends DescMessage } ? MessageInitShape<O> : never;

type UnaryImpl<M> = (request: In<M>, ctx: CallContext) => Promise<Out<M>> | Out<M>;
/** Sends one message; a returned promise means "the client is slow, wait for it if you can". */
export type Send<M> = (message: M) => Promise<void> | undefined;
type ServerStreamingImpl<M> = (request: In<M>, ctx: CallContext, send: Send<Out<M>>) => Promise<void>;
type ClientStreamingImpl<M> = (requests: AsyncIterable<In<M>>, ctx: CallContext) => Promise<Out<M>>;

type MethodImpls<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]['methodKind'] extends 'unary'
    ? UnaryImpl<S[K]>
    : S[K]['methodKind'] extends 'server_streaming'
      ? ServerStreamingImpl<S[K]>
      : S[K]['methodKind'] extends 'client_streaming'
        ? ClientStreamingImpl<S[K]>
        : never;
};

/** Implementation of every method of a generated service, e.g. `ServiceImpl<typeof Process>`. */
export type ServiceImpl<T> = T extends GenService<infer S> ? MethodImpls<S> : never;

interface Route {
  method: DescMethod;
  impl: (...args: never[]) => unknown;
}

export interface RouterOptions {
  /** Largest single message accepted, after decompression. */
  maxMessageBytes: number;
}

const unaryContentType = /^application\/(json|proto)(?:\s*;\s*charset=utf-?8)?\s*$/i;
const streamContentType = /^application\/connect\+(json|proto)(?:\s*;\s*charset=utf-?8)?\s*$/i;

/** Serves Connect-protocol RPCs (unary, server-streaming, client-streaming) on node:http. */
export class ConnectRouter {
  private readonly routes = new Map<string, Route>();
  private readonly servicePrefixes = new Set<string>();

  constructor(private readonly options: RouterOptions) {}

  register<S extends GenServiceMethods>(service: GenService<S>, impl: MethodImpls<S>): void {
    for (const method of service.methods) {
      const fn = (impl as Record<string, Route['impl']>)[method.localName];
      if (!fn) throw new Error(`missing implementation for ${service.typeName}.${method.name}`);
      this.routes.set(`/${service.typeName}/${method.name}`, { method, impl: fn });
    }
    this.servicePrefixes.add(`/${service.typeName}/`);
  }

  /** Whether this path belongs to a registered service (unknown methods get a Connect error). */
  owns(pathname: string): boolean {
    if (this.routes.has(pathname)) return true;
    const slash = pathname.indexOf('/', 1);
    return slash > 0 && this.servicePrefixes.has(pathname.slice(0, slash + 1));
  }

  async handle(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<void> {
    const route = this.routes.get(pathname);
    if (!route) return writeUnaryError(res, new ConnectError('unimplemented', `${pathname} is not implemented`), 404);
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      return writeUnaryError(res, new ConnectError('unimplemented', `HTTP method ${req.method} is not supported, use POST`), 405);
    }
    const streaming = route.method.methodKind !== 'unary';
    const contentType = req.headers['content-type'] ?? '';
    const match = (streaming ? streamContentType : unaryContentType).exec(contentType);
    if (!match) {
      res.setHeader('accept-post', streaming ? 'application/connect+json, application/connect+proto' : 'application/json, application/proto');
      return writeUnaryError(res, new ConnectError('unknown', `unsupported content type "${contentType}"`), 415);
    }
    const codec = match[1]!.toLowerCase() === 'proto' ? protoCodec : jsonCodec;

    const call = this.startCall(req, res, route.method);
    try {
      if (!streaming) await this.serveUnary(req, res, route, codec, call.ctx);
      else await this.serveStream(req, res, route, codec, `application/connect+${codec.name}`, call.ctx);
    } finally {
      call.finish();
    }
  }

  private startCall(req: IncomingMessage, res: ServerResponse, method: DescMethod) {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let timeoutMs: number | undefined;
    let headerError: ConnectError | undefined;
    try {
      checkProtocolVersion(req.headers);
      timeoutMs = parseTimeout(req.headers['connect-timeout-ms']);
    } catch (err) {
      headerError = toConnectError(err);
    }
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => controller.abort(new ConnectError('deadline_exceeded', 'the operation timed out')), timeoutMs);
    }
    const onClose = () => {
      if (!res.writableFinished) controller.abort(new ConnectError('canceled', 'the client closed the request'));
    };
    res.on('close', onClose);
    if (headerError) controller.abort(headerError);
    const ctx: CallContext = { method, requestHeaders: req.headers, signal: controller.signal, timeoutMs };
    return {
      ctx,
      finish: () => {
        clearTimeout(timer);
        res.off('close', onClose);
      },
    };
  }

  private async serveUnary(req: IncomingMessage, res: ServerResponse, route: Route, codec: Codec, ctx: CallContext) {
    try {
      throwIfAborted(ctx.signal);
      const body = await raceAbort(readAll(decodedBody(req, header(req.headers['content-encoding'])), this.options.maxMessageBytes), ctx.signal);
      const input = codec.parse(route.method.input, body);
      const output = await raceAbort(Promise.resolve((route.impl as UnaryImpl<unknown>)(input as never, ctx)), ctx.signal);
      const bytes = codec.serialize(route.method.output, output as MessageInitShape<DescMessage>);
      res.writeHead(200, { 'content-type': `application/${codec.name}`, 'content-length': bytes.length });
      res.end(bytes);
    } catch (err) {
      writeUnaryError(res, err);
    }
  }

  private async serveStream(req: IncomingMessage, res: ServerResponse, route: Route, codec: Codec, contentType: string, ctx: CallContext) {
    const stream = new ResponseStream(res, codec, route.method.output, contentType);
    try {
      throwIfAborted(ctx.signal);
      const envelopes = readEnvelopes(decodedBody(req, undefined), this.options.maxMessageBytes);
      const messages = this.decodeMessages(envelopes, route.method.input, codec, header(req.headers['connect-content-encoding']));
      if (route.method.methodKind === 'client_streaming') {
        const impl = route.impl as ClientStreamingImpl<unknown>;
        const output = await raceAbort(impl(messages as AsyncIterable<never>, ctx), ctx.signal);
        await stream.send(output as never);
      } else {
        const input = await raceAbort(singleMessage(messages), ctx.signal);
        const impl = route.impl as ServerStreamingImpl<unknown>;
        await raceAbort(impl(input as never, ctx, stream.send as never), ctx.signal);
      }
      stream.end();
    } catch (err) {
      stream.end(err);
    }
  }

  private async *decodeMessages(envelopes: AsyncIterable<Envelope>, schema: DescMessage, codec: Codec, encoding: string | undefined) {
    const gzip = (encoding ?? 'identity').toLowerCase() === 'gzip';
    if (!gzip && encoding !== undefined && encoding.toLowerCase() !== 'identity') {
      throw new ConnectError('unimplemented', `unsupported compression "${encoding}", supported: gzip, identity`);
    }
    for await (const envelope of envelopes) {
      if (envelope.flags & FLAG_END_STREAM) throw new ConnectError('invalid_argument', 'protocol error: unexpected end-stream message from the client');
      let data = envelope.data;
      if (envelope.flags & FLAG_COMPRESSED) {
        if (!gzip) throw new ConnectError('invalid_argument', 'protocol error: compressed message without Connect-Content-Encoding');
        data = gunzipMessage(data, this.options.maxMessageBytes);
      }
      yield codec.parse(schema, data);
    }
  }
}

async function singleMessage<T>(messages: AsyncIterable<T>): Promise<T> {
  let first: T | undefined;
  let count = 0;
  for await (const message of messages) {
    if (count++ === 0) first = message;
  }
  if (count !== 1) throw new ConnectError('invalid_argument', `protocol error: expected exactly one request message, got ${count}`);
  return first as T;
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function checkProtocolVersion(headers: IncomingHttpHeaders): void {
  const version = header(headers['connect-protocol-version']);
  if (version !== undefined && version !== '1') {
    throw new ConnectError('invalid_argument', `unsupported Connect-Protocol-Version "${version}", expected "1"`);
  }
}

function parseTimeout(value: string | string[] | undefined): number | undefined {
  const text = header(value);
  if (text === undefined || text === '') return undefined;
  if (!/^\d{1,10}$/.test(text)) throw new ConnectError('invalid_argument', `protocol error: invalid Connect-Timeout-Ms "${text}"`);
  return Number(text);
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw signal.reason;
}

/** Settles with the promise, or rejects with the abort reason as soon as the signal fires. */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => { /* the abort reason is the answer; the call's own end no longer matters */ });
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

export function writeUnaryError(res: ServerResponse, err: unknown, status?: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const error = toConnectError(err);
  const body = JSON.stringify(error.toJSON());
  giveUpOnBody(res);
  res.writeHead(status ?? httpStatusOf(error.code), {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
