/**
 * The code interpreter inside a sandbox: listens on 0.0.0.0:49999 (SVC_CODE_INTERPRETER_PORT),
 * starts the python and javascript default contexts, logs JSON lines to stdout. Contexts start in /home/user when
 * it exists (SVC_CODE_INTERPRETER_CWD), else here.
 */
import { existsSync } from 'node:fs';
import { CODE_INTERPRETER_PORT } from '@svc/contracts/code-interpreter';
import { jsonLog } from './log.ts';
import { createCodeInterpreter } from './server.ts';

const log = jsonLog();
const port = Number(process.env.SVC_CODE_INTERPRETER_PORT ?? CODE_INTERPRETER_PORT);
const host = process.env.SVC_CODE_INTERPRETER_HOST ?? '0.0.0.0';
const defaultCwd = process.env.SVC_CODE_INTERPRETER_CWD ?? (existsSync('/home/user') ? '/home/user' : process.cwd());

// envd's /envs: the sandbox's environment and the access check (access.ts); tests run the bundle beside a stand-in.
const envdEnvsUrl = process.env.SVC_CODE_INTERPRETER_ENVD_ENVS_URL || undefined;
const interpreter = createCodeInterpreter({ log, defaultCwd, ...(envdEnvsUrl ? { envdEnvsUrl } : {}) });

interpreter.server.on('error', (err) => {
  log('error', `code interpreter: ${err.message}`);
  process.exit(1);
});
interpreter.server.listen(port, host, () => {
  log('info', 'code interpreter listening', { host, port, cwd: defaultCwd });
  interpreter.warmUp().then(
    () => log('info', 'default contexts ready'),
    (err: Error) => log('error', `a default context did not start (it is tried again at first use): ${err.message}`),
  );
});

// The service must outlive a bug in one request: log it and keep serving.
process.on('uncaughtException', (err) => log('error', `uncaught exception: ${err.stack ?? err.message}`));
process.on('unhandledRejection', (err) => log('error', `unhandled rejection: ${(err as Error)?.stack ?? String(err)}`));

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    interpreter.close().finally(() => process.exit(0));
  });
}
