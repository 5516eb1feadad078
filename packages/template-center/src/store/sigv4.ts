import { createHash, createHmac } from 'node:crypto';

/** AWS Signature Version 4, for the S3-compatible artifact store (requests and presigned URLs). */
export interface SigV4Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface SignRequestInput {
  method: string;
  url: string | URL;
  headers?: Record<string, string>;
  /** Hex SHA-256 of the body, or 'UNSIGNED-PAYLOAD'. */
  payloadHash: string;
  region: string;
  service: string;
  credentials: SigV4Credentials;
  now?: Date;
}

export interface PresignInput {
  method: string;
  url: string | URL;
  region: string;
  service?: string;
  credentials: SigV4Credentials;
  expiresSec: number;
  now?: Date;
}

export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const ALGORITHM = 'AWS4-HMAC-SHA256';

/** Headers to send (everything signed except `host`, which fetch derives from the URL). */
export function signRequest(input: SignRequestInput): { headers: Record<string, string>; signature: string } {
  const url = new URL(input.url);
  const { amzDate, dateStamp } = timestamps(input.now ?? new Date());
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(input.headers ?? {})) headers[k.toLowerCase()] = v;
  headers.host = url.host;
  headers['x-amz-date'] = amzDate;
  if (input.service === 's3') headers['x-amz-content-sha256'] = input.payloadHash;
  if (input.credentials.sessionToken) headers['x-amz-security-token'] = input.credentials.sessionToken;

  const names = Object.keys(headers).sort();
  const signedHeaders = names.join(';');
  const canonical = [
    input.method.toUpperCase(),
    canonicalPath(url),
    canonicalQuery(url.searchParams),
    names.map((n) => `${n}:${headers[n].trim().replace(/\s+/g, ' ')}\n`).join(''),
    signedHeaders,
    input.payloadHash,
  ].join('\n');
  const scope = `${dateStamp}/${input.region}/${input.service}/aws4_request`;
  const signature = sign(input.credentials.secretAccessKey, dateStamp, input.region, input.service, stringToSign(amzDate, scope, canonical));
  const { host: _host, ...toSend } = headers;
  toSend.authorization = `${ALGORITHM} Credential=${input.credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return { headers: toSend, signature };
}

/** A URL anyone can use for `method` until it expires; only `host` is signed. */
export function presignUrl(input: PresignInput): string {
  const service = input.service ?? 's3';
  const url = new URL(input.url);
  const { amzDate, dateStamp } = timestamps(input.now ?? new Date());
  const scope = `${dateStamp}/${input.region}/${service}/aws4_request`;
  const params = new URLSearchParams(url.searchParams);
  params.set('X-Amz-Algorithm', ALGORITHM);
  params.set('X-Amz-Credential', `${input.credentials.accessKeyId}/${scope}`);
  params.set('X-Amz-Date', amzDate);
  params.set('X-Amz-Expires', String(input.expiresSec));
  params.set('X-Amz-SignedHeaders', 'host');
  if (input.credentials.sessionToken) params.set('X-Amz-Security-Token', input.credentials.sessionToken);
  const query = canonicalQuery(params);
  const canonical = [input.method.toUpperCase(), canonicalPath(url), query, `host:${url.host}\n`, 'host', 'UNSIGNED-PAYLOAD'].join('\n');
  const signature = sign(input.credentials.secretAccessKey, dateStamp, input.region, service, stringToSign(amzDate, scope, canonical));
  return `${url.origin}${canonicalPath(url)}?${query}&X-Amz-Signature=${signature}`;
}

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
export function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** S3 style: each segment encoded once, no dot-segment normalisation. */
function canonicalPath(url: URL): string {
  const path = url.pathname || '/';
  return path.split('/').map((seg) => uriEncode(decodeURIComponent(seg))).join('/');
}

function canonicalQuery(params: URLSearchParams): string {
  const pairs = [...params].map(([k, v]) => [uriEncode(k), uriEncode(v)] as const);
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

function stringToSign(amzDate: string, scope: string, canonicalRequest: string): string {
  return [ALGORITHM, amzDate, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join('\n');
}

function sign(secret: string, dateStamp: string, region: string, service: string, toSign: string): string {
  const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
  const kSigning = hmac(hmac(hmac(hmac(`AWS4${secret}`, dateStamp), region), service), 'aws4_request');
  return createHmac('sha256', kSigning).update(toSign).digest('hex');
}

function timestamps(d: Date): { amzDate: string; dateStamp: string } {
  const amzDate = d.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  return { amzDate, dateStamp: amzDate.slice(0, 8) };
}
