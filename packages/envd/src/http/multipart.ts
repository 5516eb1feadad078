import { ConnectError } from '../connect/code.ts';

export interface PartHeaders {
  /** `name` of the form field. */
  name: string | undefined;
  /** `filename` (or RFC 5987 `filename*`) as sent, directories included. */
  filename: string | undefined;
}

export interface PartSink {
  write(data: Buffer): Promise<void>;
  end(): Promise<void>;
}

type State = 'preamble' | 'delimiter' | 'headers' | 'body' | 'done';

const crlf = Buffer.from('\r\n');
const headerEnd = Buffer.from('\r\n\r\n');
const maxHeaderBytes = 16 * 1024;

/**
 * Streaming multipart/form-data reader: part bodies are handed to their sink as they arrive and
 * each write is awaited, so an upload never sits in memory and a slow disk slows the client.
 */
export class MultipartReader {
  private readonly delimiter: Buffer;
  // The body's first delimiter has no CRLF before it; pretend it had one.
  private buf: Buffer = Buffer.from(crlf);
  private state: State = 'preamble';
  private sink: PartSink | undefined;

  constructor(
    boundary: string,
    private readonly onPart: (headers: PartHeaders) => Promise<PartSink>,
  ) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  async write(chunk: Buffer): Promise<void> {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    for (;;) {
      const progressed = await this.step();
      if (!progressed) return;
    }
  }

  async end(): Promise<void> {
    if (this.state !== 'done') throw new ConnectError('invalid_argument', 'malformed multipart body: it ends before the closing boundary');
  }

  private async step(): Promise<boolean> {
    switch (this.state) {
      case 'preamble': {
        const at = this.buf.indexOf(this.delimiter);
        if (at === -1) {
          this.buf = this.keepTail(this.buf);
          return false;
        }
        this.buf = this.buf.subarray(at + this.delimiter.length);
        this.state = 'delimiter';
        return true;
      }
      case 'delimiter': {
        if (this.buf.length < 2) return false;
        if (this.buf[0] === 0x2d && this.buf[1] === 0x2d) {
          this.state = 'done';
          this.buf = Buffer.alloc(0);
          return false;
        }
        const eol = this.buf.indexOf(crlf);
        if (eol === -1) {
          if (this.buf.length > 1024) throw malformed('no line break after a boundary');
          return false;
        }
        if (this.buf.subarray(0, eol).toString('latin1').trim() !== '') throw malformed('unexpected text after a boundary');
        this.buf = this.buf.subarray(eol + 2);
        this.state = 'headers';
        return true;
      }
      case 'headers': {
        let block: string;
        if (this.buf.subarray(0, 2).equals(crlf)) {
          block = '';
          this.buf = this.buf.subarray(2);
        } else {
          const end = this.buf.indexOf(headerEnd);
          if (end === -1) {
            if (this.buf.length > maxHeaderBytes) throw malformed('part headers are too large');
            return false;
          }
          block = this.buf.subarray(0, end).toString('utf8');
          this.buf = this.buf.subarray(end + 4);
        }
        this.sink = await this.onPart(parsePartHeaders(block));
        this.state = 'body';
        return true;
      }
      case 'body': {
        const at = this.buf.indexOf(this.delimiter);
        if (at === -1) {
          const keep = this.delimiter.length - 1;
          if (this.buf.length > keep) {
            const data = this.buf.subarray(0, this.buf.length - keep);
            this.buf = this.buf.subarray(this.buf.length - keep);
            await this.sink!.write(data);
          }
          return false;
        }
        if (at > 0) await this.sink!.write(this.buf.subarray(0, at));
        this.buf = this.buf.subarray(at + this.delimiter.length);
        await this.sink!.end();
        this.sink = undefined;
        this.state = 'delimiter';
        return true;
      }
      case 'done':
        this.buf = Buffer.alloc(0);
        return false;
    }
  }

  private keepTail(buf: Buffer): Buffer {
    const keep = this.delimiter.length - 1;
    return buf.length > keep ? Buffer.from(buf.subarray(buf.length - keep)) : buf;
  }
}

/** The boundary parameter of a multipart Content-Type. */
export function multipartBoundary(contentType: string): string {
  const params = parseParams(contentType.slice(contentType.indexOf(';') + 1));
  const boundary = params.get('boundary');
  if (!boundary || boundary.length > 200) throw malformed('missing or invalid boundary in Content-Type');
  return boundary;
}

function parsePartHeaders(block: string): PartHeaders {
  let disposition = '';
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'content-disposition') disposition = line.slice(colon + 1).trim();
  }
  const params = parseParams(disposition.slice(disposition.indexOf(';') + 1));
  let filename = params.get('filename');
  const extended = params.get('filename*');
  if (extended) {
    const match = /^([^']*)'[^']*'(.*)$/.exec(extended);
    if (match) {
      try {
        filename = decodeURIComponent(match[2]!);
      } catch {
        // keep the plain filename
      }
    }
  }
  return { name: params.get('name'), filename };
}

/** `key=value; key="quoted \"value\""` parameters, keys lowercased. */
function parseParams(text: string): Map<string, string> {
  const params = new Map<string, string>();
  const re = /\s*([^=;\s]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))\s*;?/gy;
  let match: RegExpExecArray | null;
  while ((match = re.exec(text)) !== null) {
    const value = match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : match[3]!.trim();
    const key = match[1]!.toLowerCase();
    if (!params.has(key)) params.set(key, value);
  }
  return params;
}

function malformed(reason: string): ConnectError {
  return new ConnectError('invalid_argument', `malformed multipart body: ${reason}`);
}
