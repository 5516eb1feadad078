/**
 * The request bodies read and checked: a body is JSON of the contract's shape, or a 400 with
 * what is wrong.
 */
import type { IncomingMessage } from 'node:http';
import { CODE_LANGUAGES, isCodeLanguage, normalizeLanguage, type CodeLanguage, type CreateContextRequest, type ExecuteRequest } from '@svc/contracts/code-interpreter';

/** An execution's body: its code, which may be a large generated program. */
export const MAX_EXECUTE_BODY_BYTES = 16 * 1024 * 1024;
/** A context's body is a language and a cwd (a path is at most 4 KiB on Linux). */
export const MAX_CONTEXT_BODY_BYTES = 8 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface HttpProblem {
  status: number;
  message: string;
}

export function isProblem(v: unknown): v is HttpProblem {
  return typeof v === 'object' && v !== null && 'status' in v && 'message' in v;
}

/**
 * The body as JSON; an empty body is `{}`. A body past `maxBytes` is a 413 as soon as its
 * Content-Length or its bytes say so; the rest is left unread (sendProblem closes the connection).
 */
export function readJson(req: IncomingMessage, maxBytes: number): Promise<{ json: unknown } | HttpProblem> {
  const tooLarge: HttpProblem = { status: 413, message: `the body is larger than ${maxBytes} bytes` };
  if (Number(req.headers['content-length']) > maxBytes) return Promise.resolve(tooLarge);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (result: { json: unknown } | HttpProblem) => {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) return void chunks.push(chunk);
      req.pause();
      settle(tooLarge);
    };
    const onEnd = () => settle(parseBody(Buffer.concat(chunks).toString('utf8')));
    // The client went away mid-body: there is no one to answer, but the route still ends cleanly.
    const onError = (err: Error) => settle(bad(`the body could not be read: ${err.message}`));
    const onClose = () => settle(bad('the connection closed before the body ended'));
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

function parseBody(text: string): { json: unknown } | HttpProblem {
  if (!text.trim()) return { json: {} };
  try {
    return { json: JSON.parse(text) as unknown };
  } catch (err) {
    return bad(`the body is not JSON: ${(err as Error).message}`);
  }
}

/** A checked execute request; its language, when given, normalized and supported. */
export type Execution = Omit<ExecuteRequest, 'language'> & { language?: CodeLanguage };

export function parseExecuteRequest(body: unknown): Execution | HttpProblem {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return bad('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (typeof b.code !== 'string') return bad('code is required and must be a string');
  if (b.context_id != null && typeof b.context_id !== 'string') return bad('context_id must be a string');
  if (b.language != null && typeof b.language !== 'string') return bad('language must be a string');
  if (b.context_id && b.language) return bad('Only one of context_id or language can be provided');
  let language: CodeLanguage | undefined;
  if (b.language) {
    const l = checkLanguage(b.language as string);
    if (isProblem(l)) return l;
    language = l;
  }
  const env = parseEnvVars(b.env_vars);
  if (isProblem(env)) return env;
  return { code: b.code, context_id: (b.context_id as string | null | undefined) || undefined, language, env_vars: env };
}

export function parseCreateContext(body: unknown): { language: CodeLanguage; cwd?: string } | HttpProblem {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return bad('the body must be a JSON object');
  const b = body as CreateContextRequest & Record<string, unknown>;
  if (b.language != null && typeof b.language !== 'string') return bad('language must be a string');
  if (b.cwd != null && typeof b.cwd !== 'string') return bad('cwd must be a string');
  const language = checkLanguage(b.language);
  if (isProblem(language)) return language;
  return { language, cwd: b.cwd || undefined };
}

function checkLanguage(requested: string | null | undefined): CodeLanguage | HttpProblem {
  const name = normalizeLanguage(requested);
  if (isCodeLanguage(name)) return name;
  return bad(`language ${JSON.stringify(requested)} is not supported; supported languages: ${CODE_LANGUAGES.join(', ')} (js and ts for short)`);
}

function parseEnvVars(v: unknown): Record<string, string> | undefined | HttpProblem {
  if (v == null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) return bad('env_vars must be an object of strings');
  for (const [k, value] of Object.entries(v)) {
    if (!ENV_NAME.test(k)) return bad(`env_vars: ${JSON.stringify(k)} is not a valid environment variable name`);
    if (typeof value !== 'string') return bad(`env_vars.${k} must be a string`);
    if (value.includes('\0')) return bad(`env_vars.${k} must not contain a NUL character`);
  }
  return Object.keys(v).length ? (v as Record<string, string>) : undefined;
}

function bad(message: string): HttpProblem {
  return { status: 400, message };
}
