/**
 * The lean HTTP/1.1 forwarding path both proxies share (docs/design.md "One HTTP/1.1 path"). The
 * client side: a strict request parser and a server that answers straight on the socket
 * (LeanServer, ServerRequest, ServerReply) in place of node's http server. The upstream side:
 * keep-alive connections, a response parser that hands bodies on without copies, and the
 * request head as one write. node's http server and client do the same jobs at several times
 * the CPU per request.
 */
export { ResponseParser, ResponseParseError, type ResponseEvents } from './response-parser.ts';
export { UpstreamConnection, UpstreamPool, type Dial, type DialedSocket, type ResponseSink, type UpstreamConnectionError, type UpstreamPoolOptions } from './upstream-pool.ts';
export { requestHead, hasContentLength, InvalidHeaderError, droppableWhenListed } from './request-head.ts';
export { relayReplyChunk, streamServerBody } from './body-stream.ts';
export { RequestParseError } from './request-parser.ts';
export { LeanServer, type LeanHandler, type LeanServerOptions } from './lean-server.ts';
export { ServerRequest } from './server-request.ts';
export { ServerReply } from './server-reply.ts';
