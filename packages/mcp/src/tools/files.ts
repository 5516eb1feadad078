/**
 * write_file, read_file and list_files: a sandbox's files through its envd. read_file returns text
 * (cut at MAX_READ_BYTES, saying so), an image as image content, and for other binary files only
 * what they are and their size.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { SandboxError, type EntryInfo, type Sandbox } from '@svc/sdk';
import { z } from 'zod';
import { MAX_IMAGE_BYTES, MAX_LIST_ANSWER_BYTES, MAX_LIST_ENTRIES, MAX_READ_BYTES, formatBytes } from '../output.ts';
import { ToolFailure, textResult } from '../results.ts';
import type { McpSession } from '../session.ts';
import { registerSvcTool, type ToolCall } from '../tool-kit.ts';
import { sandboxIdArg } from './sandboxes.ts';

const pathArg = z.string().min(1).describe('an absolute path in the sandbox, or one relative to the user\'s home (/home/user)');

export function registerFileTools(server: McpServer, session: McpSession): void {
  registerSvcTool(server, session, 'write_file', {
    title: 'Write a file',
    description: 'Writes a file in a sandbox, creating its parent directories and replacing a file already there. '
      + "Text is written as UTF-8; for binary content pass it base64-encoded with encoding: 'base64'.",
    inputSchema: {
      sandboxId: sandboxIdArg,
      path: pathArg,
      content: z.string().describe('the whole content of the file'),
      encoding: z.enum(['utf8', 'base64']).optional().describe("how content is encoded (default 'utf8')"),
    },
    annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
  }, async (args, call) => {
    const data = args.encoding === 'base64' ? Buffer.from(args.content, 'base64') : Buffer.from(args.content, 'utf8');
    const written = await onSandbox(call, args.sandboxId, (sbx) => sbx.files.write(args.path, new Uint8Array(data), { signal: call.signal }));
    return textResult(`wrote ${formatBytes(data.length)} to ${written.path}`);
  });

  registerSvcTool(server, session, 'read_file', {
    title: 'Read a file',
    description: `Reads a file from a sandbox. Text comes back as text (the first ${MAX_READ_BYTES} bytes of a longer file, saying so); `
      + 'a PNG, JPEG, GIF or WebP image as an image; for another binary file, its size only (inspect it with run_command).',
    inputSchema: { sandboxId: sandboxIdArg, path: pathArg },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, call) => {
    const { bytes, complete } = await onSandbox(call, args.sandboxId, (sbx) => readHead(sbx, args.path, MAX_IMAGE_BYTES, call.signal));
    const size = complete ? bytes.length : await onSandbox(call, args.sandboxId, async (sbx) => (await sbx.files.getInfo(args.path)).size);
    return fileResult(args.path, bytes, size, complete);
  });

  registerSvcTool(server, session, 'list_files', {
    title: 'List a directory',
    description: 'Lists a directory of a sandbox: each entry\'s name, type (file, dir) and size in bytes. depth > 1 also lists subdirectories.',
    inputSchema: {
      sandboxId: sandboxIdArg,
      path: pathArg.optional().describe('the directory (default /home/user)'),
      depth: z.number().int().min(1).max(10).optional().describe('how many levels to list (default 1)'),
    },
    outputSchema: {
      entries: z.array(z.object({ name: z.string(), path: z.string(), type: z.string(), size: z.number() })),
      truncated: z.boolean(),
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, async (args, call) => {
    const dir = args.path ?? '/home/user';
    const all = await onSandbox(call, args.sandboxId, (sbx) => listBounded(sbx, dir, args.depth, call.signal));
    const truncated = all.length > MAX_LIST_ENTRIES;
    const entries = all.slice(0, MAX_LIST_ENTRIES).map((e: EntryInfo) => ({ name: e.name, path: e.path, type: String(e.type ?? 'unknown'), size: e.size }));
    const lines = entries.map((e) => `${e.type === 'dir' ? 'dir ' : 'file'}  ${e.type === 'dir' ? '-'.padStart(10) : String(e.size).padStart(10)}  ${args.depth && args.depth > 1 ? e.path : e.name}`);
    const text = entries.length === 0
      ? `${dir} is empty`
      : `${lines.join('\n')}${truncated ? `\n[only the first ${MAX_LIST_ENTRIES} of ${all.length} entries are shown]` : ''}`;
    return textResult(text, { entries, truncated });
  });
}

/** A call on the sandbox's envd; a failure is explained (the sandbox gone or paused) when the API can say. */
async function onSandbox<T>(call: ToolCall, sandboxId: string, fn: (sbx: Sandbox) => Promise<T>): Promise<T> {
  const sbx = await call.session.sandbox(sandboxId, call.opts);
  try {
    return await fn(sbx);
  } catch (err) {
    throw await call.session.explain(sandboxId, call.opts, err);
  }
}

/**
 * The listing, read only up to MAX_LIST_ANSWER_BYTES (output.ts says why); a larger one is a tool
 * failure telling the model how to ask for less.
 */
async function listBounded(sbx: Sandbox, dir: string, depth: number | undefined, signal: AbortSignal): Promise<EntryInfo[]> {
  try {
    return await sbx.files.list(dir, { depth, signal, maxBytes: MAX_LIST_ANSWER_BYTES });
  } catch (err) {
    if (!(err instanceof SandboxError) || err.code !== 'too_large') throw err;
    const limit = `the listing of ${dir} is larger than ${MAX_LIST_ANSWER_BYTES / 1024 / 1024} MiB, more than list_files reads`;
    throw new ToolFailure(depth && depth > 1
      ? `${limit}; ask for a smaller depth or a deeper path`
      : `${limit}; list a deeper path, or look with run_command (ls ${dir} | head -n 100; ls ${dir} | wc -l)`);
  }
}

/** Up to `max` bytes of the file; `complete` when that was all of it. */
async function readHead(sbx: Sandbox, path: string, max: number, signal: AbortSignal): Promise<{ bytes: Uint8Array; complete: boolean }> {
  const stream = await sbx.files.read(path, { format: 'stream', signal });
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { bytes: concat(chunks, length), complete: true };
      chunks.push(value);
      length += value.length;
      if (length > max) return { bytes: concat(chunks, length).subarray(0, max), complete: false };
    }
  } finally {
    await reader.cancel().catch((err: Error) => {
      // the answer was read as far as needed; a failed cancel only leaves its connection to close on its own
      void err;
    });
  }
}

function concat(chunks: Uint8Array[], length: number): Uint8Array {
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length);
}

const IMAGE_MAGIC: Array<[string, (b: Uint8Array) => boolean]> = [
  ['image/png', (b) => b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47],
  ['image/jpeg', (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff],
  ['image/gif', (b) => b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38],
  ['image/webp', (b) => Buffer.from(b.subarray(0, 4)).toString('latin1') === 'RIFF' && Buffer.from(b.subarray(8, 12)).toString('latin1') === 'WEBP'],
];

/** Text when the head decodes as UTF-8 and holds no NUL byte. */
function decodeText(bytes: Uint8Array): string | undefined {
  if (bytes.subarray(0, 8192).includes(0)) return undefined;
  try {
    // stream: a character cut at the end of a truncated read is left out, not an error
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: true });
  } catch {
    return undefined; // not UTF-8: reported as binary
  }
}

function fileResult(path: string, bytes: Uint8Array, size: number, complete: boolean): CallToolResult {
  if (size === 0) return textResult(`${path} is empty`);
  const image = IMAGE_MAGIC.find(([, test]) => test(bytes))?.[0];
  if (image && complete) {
    return { content: [{ type: 'text', text: `${path}: ${image}, ${formatBytes(size)}` }, { type: 'image', data: Buffer.from(bytes).toString('base64'), mimeType: image }] };
  }
  const head = bytes.subarray(0, MAX_READ_BYTES);
  const text = decodeText(head);
  if (text === undefined || image) {
    return textResult(`${path} is a binary file${image ? ` (${image}, too large to show)` : ''} of ${size} bytes (${formatBytes(size)}); read_file shows text only: `
      + `inspect it with run_command (file ${path}; xxd ${path} | head)`);
  }
  if (size <= MAX_READ_BYTES) return textResult(text);
  return textResult(`${text}\n[… truncated: this is the first ${MAX_READ_BYTES} of ${size} bytes; read further with run_command, `
    + `e.g. tail -c +${MAX_READ_BYTES + 1} ${path} | head -c ${MAX_READ_BYTES}]`);
}
