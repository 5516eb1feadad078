/**
 * The lean HTTP/1.1 forwarding path both proxies share (docs/design.md "One HTTP/1.1 path"):
 * keep-alive upstream connections, a response parser that hands bodies on without copies, and
 * the request head as one write. node's http client does the same job at about three times the
 * CPU per request.
 */
export { ResponseParser, ResponseParseError, type ResponseEvents } from './response-parser.ts';
export { UpstreamConnection, UpstreamPool, type Dial, type DialedSocket, type ResponseSink, type UpstreamConnectionError, type UpstreamPoolOptions } from './upstream-pool.ts';
export { requestHead, hasContentLength, InvalidHeaderError } from './request-head.ts';
export { relayResponseChunk, streamRequestBody, trailerPairs } from './body-stream.ts';
