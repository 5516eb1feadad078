/**
 * The wire of the code interpreter, the service inside a sandbox on port 49999 that the official
 * `@e2b/code-interpreter` SDK talks to (E2B's template/server): what /execute and the contexts
 * routes take and answer. `POST /execute` answers NDJSON, one `ExecutionLine` a line, always
 * ending with `end_of_execution`. Errors are svc's `{code, message}` body with status 400/404/500.
 */

export const CODE_INTERPRETER_PORT = 49999;

/** Where the node agent puts the service's bundle in every sandbox (the read-only /.svc runtime). */
export const CODE_INTERPRETER_BUNDLE = '/.svc/code-interpreter/code-interpreter.mjs';

/**
 * Node as every sandbox has it: the /.svc runtime's binary through its own loader and libraries,
 * so it runs whatever the image's libc. Started this way, a process's execPath is the loader, so
 * the service is told the whole command (SVC_CODE_INTERPRETER_NODE) for the Node processes it
 * starts itself (JavaScript contexts).
 */
export const SANDBOX_NODE_COMMAND = '/.svc/lib/ld-linux-x86-64.so.2 --library-path /.svc/lib /.svc/bin/node';

/**
 * The `code-interpreter-v1` template's start command (docs/code-interpreter.md): as root, through
 * sudo, as E2B's template starts its Jupyter server, so code runs as root in /home/user there too.
 */
export const CODE_INTERPRETER_START_CMD = `exec sudo env SVC_CODE_INTERPRETER_NODE='${SANDBOX_NODE_COMMAND}' ${SANDBOX_NODE_COMMAND} ${CODE_INTERPRETER_BUNDLE}`;

/** Its ready command: the service answers (its default contexts start behind it; a run or a list waits for them). */
export const CODE_INTERPRETER_READY_CMD = `curl -sf -o /dev/null http://127.0.0.1:${CODE_INTERPRETER_PORT}/health`;

/** The languages a context can run; `js` and `ts` are accepted as aliases (normalizeLanguage). */
export const CODE_LANGUAGES = ['python', 'javascript', 'typescript', 'bash'] as const;
export type CodeLanguage = (typeof CODE_LANGUAGES)[number];

/**
 * A requested language as E2B's server reads it: absent or empty is python, the name is
 * lower-cased and trimmed, js and ts are javascript and typescript. The result may still be a
 * language svc does not run (r, java): isCodeLanguage tells.
 */
export function normalizeLanguage(language: string | null | undefined): string {
  if (!language) return 'python';
  const name = language.trim().toLowerCase();
  if (name === 'js') return 'javascript';
  if (name === 'ts') return 'typescript';
  return name;
}

export function isCodeLanguage(name: string): name is CodeLanguage {
  return (CODE_LANGUAGES as readonly string[]).includes(name);
}

/** `POST /execute`. Only one of `context_id` and `language`; neither runs in the python default context. */
export interface ExecuteRequest {
  code: string;
  context_id?: string | null;
  language?: string | null;
  /** Set for this execution only, then restored to the sandbox's value or removed. */
  env_vars?: Record<string, string> | null;
}

/** `POST /contexts`; the language defaults to python, cwd to /home/user. */
export interface CreateContextRequest {
  language?: string | null;
  cwd?: string | null;
}

/** A context as `POST /contexts` and `GET /contexts` answer it. */
export interface CodeContext {
  id: string;
  language: string;
  cwd: string;
}

export interface StdoutLine {
  type: 'stdout';
  text: string;
  /** ISO 8601 time the output was produced. */
  timestamp: string;
}

export interface StderrLine {
  type: 'stderr';
  text: string;
  timestamp: string;
}

/**
 * One display of a value: the last expression's (`is_main_result`) or a display call's. Each
 * representation the kernel produced sits in its field (Jupyter MIME type → field: text/plain →
 * text, text/html → html, image/png → png (base64), e2b/data → data, e2b/chart → chart, ...);
 * MIME types without a field go into `extra`.
 */
export interface ResultLine {
  type: 'result';
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  pdf?: string;
  latex?: string;
  json?: Record<string, unknown>;
  javascript?: string;
  /** A pandas DataFrame, column name → values. */
  data?: Record<string, unknown>;
  /** A matplotlib figure's chart (E2B's chart shape). */
  chart?: Record<string, unknown>;
  extra?: Record<string, unknown>;
  is_main_result: boolean;
}

export interface ErrorLine {
  type: 'error';
  name: string;
  value: string;
  traceback: string;
}

export interface NumberOfExecutionsLine {
  type: 'number_of_executions';
  execution_count: number;
}

export interface EndOfExecutionLine {
  type: 'end_of_execution';
}

/** The kernel ended during the execution (it died or was restarted); an `error` line precedes it. */
export interface UnexpectedEndOfExecutionLine {
  type: 'unexpected_end_of_execution';
}

/** Written every few seconds while nothing else is, so that a gone client is noticed; clients skip it. */
export interface KeepaliveLine {
  type: 'keepalive';
}

/** What a kernel reports while it runs code. */
export type ExecutionOutput = StdoutLine | StderrLine | ResultLine | ErrorLine | NumberOfExecutionsLine;

/** One line of the `POST /execute` answer. */
export type ExecutionLine = ExecutionOutput | EndOfExecutionLine | UnexpectedEndOfExecutionLine | KeepaliveLine;
