/**
 * The program of a JavaScript context's child process (`node -e`), talking to the service over
 * the IPC channel. It evaluates code with node:repl's own evaluator, which gives what a notebook
 * needs: declarations that persist between executions, top-level await and the value of the last
 * expression. Everything the code prints (console, process.stdout/stderr writes) goes back over
 * IPC, so it stays in order with the execution's end.
 *
 * Messages in: {type:'execute', id, code} and {type:'env', changes}. Out: {type:'stream', id,
 * name, text}, {type:'result', id, text}, {type:'error', id, name, value, traceback},
 * {type:'done', id}, and {type:'ready'} once.
 */

function replHost(): void {
  // Not require(): a bundler renames it, and this source runs outside the bundle.
  const repl = process.getBuiltinModule('node:repl') as typeof import('node:repl');
  const domain = process.getBuiltinModule('node:domain') as typeof import('node:domain');
  const util = process.getBuiltinModule('node:util') as typeof import('node:util');
  const { Console } = process.getBuiltinModule('node:console') as typeof import('node:console');
  const { PassThrough, Writable } = process.getBuiltinModule('node:stream') as typeof import('node:stream');

  type Message = { type: 'execute'; id: string; code: string } | { type: 'env'; changes: Record<string, string | null> };
  const send = (m: Record<string, unknown>) => process.send?.(m);
  let current: string | undefined;

  const streamTo = (name: 'stdout' | 'stderr') => (chunk: unknown, encoding?: unknown, cb?: unknown): boolean => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
    if (current && text) send({ type: 'stream', id: current, name, text });
    const done = typeof encoding === 'function' ? encoding : cb;
    if (typeof done === 'function') done();
    return true;
  };
  process.stdout.write = streamTo('stdout') as typeof process.stdout.write;
  process.stderr.write = streamTo('stderr') as typeof process.stderr.write;

  const finish = (id: string) => {
    if (current !== id) return;
    current = undefined;
    send({ type: 'done', id });
  };
  const fail = (id: string, err: unknown) => {
    if (current !== id) return;
    const e = err as { name?: string; message?: string; stack?: string; err?: Error } | undefined;
    // A syntax error the REPL would wait for more input on comes wrapped (repl.Recoverable).
    const cause = e instanceof repl.Recoverable && e.err ? e.err : e;
    const isError = cause instanceof Error || (typeof cause === 'object' && cause !== null && 'stack' in cause);
    const name = isError ? String(cause?.name ?? 'Error') : 'Error';
    const value = isError ? String(cause?.message ?? '') : `Uncaught ${util.inspect(err)}`;
    // Frames of node's, the REPL's and this host's code say nothing about the user's.
    const traceback = isError ? String(cause?.stack ?? `${name}: ${value}`).split('\n').filter((l) => !/\(node:|at node:|\[eval\]|REPLServer\.|domain\.js/.test(l)).join('\n') : value;
    send({ type: 'error', id, name, value, traceback });
    finish(id);
  };

  const evalDomain = domain.create();
  // The REPL reports what the code throws to its domain instead of the eval callback.
  evalDomain.on('error', (err) => { if (current) fail(current, err); });
  const discard = new Writable({ write: (_c, _e, cb) => cb() });
  const server = repl.start({ input: new PassThrough(), output: discard, terminal: false, prompt: '', useGlobal: false, breakEvalOnSigint: true, domain: evalDomain } as import('node:repl').ReplOptions);
  const out = new Writable({ write: (c, e, cb) => { streamTo('stdout')(c, e, cb); } });
  const err = new Writable({ write: (c, e, cb) => { streamTo('stderr')(c, e, cb); } });
  server.context.console = new Console({ stdout: out, stderr: err });

  // An interrupt while the code awaits something: the execution ends, its promise is left behind.
  // While code runs synchronously, the REPL's SIGINT watchdog breaks it instead; a JS listener
  // present then would stop the watchdog from working (the process dies of the signal), so the
  // listener is off during that part.
  const onSigint = () => {
    if (current) fail(current, Object.assign(new Error('Script execution was interrupted by `SIGINT`'), { stack: 'Error: Script execution was interrupted by `SIGINT`' }));
  };
  process.on('SIGINT', onSigint);
  process.on('unhandledRejection', (reason) => {
    process.stderr.write(`Unhandled promise rejection: ${util.inspect(reason)}\n`);
  });

  process.on('message', (m: Message) => {
    if (m.type === 'env') {
      for (const [k, v] of Object.entries(m.changes)) {
        if (v === null) delete process.env[k];
        else process.env[k] = v;
      }
      send({ type: 'env-set' });
      return;
    }
    const id = m.id;
    current = id;
    process.removeListener('SIGINT', onSigint);
    try {
      server.eval(m.code, server.context, 'cell', (e, value) => {
        if (e) return fail(id, e);
        if (current === id && value !== undefined) send({ type: 'result', id, text: util.inspect(value) });
        finish(id);
      });
    } finally {
      process.on('SIGINT', onSigint);
    }
  });
  // The service ends us when it goes; an orphan would otherwise keep running.
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready' });
}

/**
 * The host as `node -e` source. A loader that transpiles this file (tsx in the tests) may wrap
 * functions in its `__name` helper, which the child does not have: it is given a no-op one.
 */
export const REPL_HOST_SOURCE = `const __name = (target) => target;\n(${replHost.toString()})();\n`;
