import http from 'node:http';
import { createReadStream } from 'node:fs';
import { ENVD_PORT } from '@svc/contracts/envd-port';
import { envdRequest, MAX_ENVD_ANSWER, readCapped } from '../../envd-client.ts';
import type { RunResult } from '../../host/exec.ts';
import type { ExecOptions } from '../driver.ts';

/** How the host reaches a guest's envd: its address, and the access token a secure sandbox was given. */
export interface EnvdTarget {
  address: string;
  accessToken?: string;
}

/** The largest envd frame taken (its output comes in chunks of a few kB). */
const MAX_FRAME = 16 * 1024 * 1024;
/** How long a killed command's stream may go on before it is cut. */
const KILL_GRACE_MS = 5_000;
/** The output a reply keeps: its last 1 MiB (onOutput saw all of it). */
const OUTPUT_TAIL = 1024 * 1024;
const tail = (text: string): string => (text.length > 2 * OUTPUT_TAIL ? text.slice(-OUTPUT_TAIL) : text);

/**
 * Runs a command in a microvm guest through envd's own Process API (Connect, JSON), the one
 * way into a guest: the host has no runsc exec there. The same request the SDK sends, as root
 * unless `opts.user` names another user; standard input from `opts.inputFile`; a command still
 * running at `timeoutMs` is killed and its stderr ends as a host command's does.
 */
export async function execThroughEnvd(target: EnvdTarget, argv: string[], opts: ExecOptions = {}): Promise<RunResult> {
  const [cmd, ...args] = argv;
  const headers: Record<string, string> = {
    authorization: `Basic ${Buffer.from(`${opts.user?.name ?? 'root'}:`).toString('base64')}`,
    ...(target.accessToken ? { 'x-access-token': target.accessToken } : {}),
  };
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const start = { process: { cmd, args, envs: opts.env ?? {}, ...(opts.cwd ? { cwd: opts.cwd } : {}) }, stdin: !!opts.inputFile };
  return new Promise<RunResult>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let pid: number | undefined;
    let exitCode: number | undefined;
    let killedAfter = false;
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => {
      killedAfter = true;
      if (pid !== undefined) void unary(target, headers, 'SendSignal', { process: { pid }, signal: 'SIGNAL_SIGKILL' }).catch(() => req.destroy());
      else req.destroy();
      // A guest whose envd took the signal and goes on streaming is cut off all the same.
      setTimeout(() => { if (!req.destroyed) { req.destroy(); resolve({ code: 137, stdout, stderr: `${stderr}\n(killed after ${timeoutMs} ms)` }); } }, KILL_GRACE_MS).unref();
    }, timeoutMs);
    const req = http.request({
      host: target.address, port: ENVD_PORT, method: 'POST', path: '/process.Process/Start', agent: false,
      headers: { ...headers, 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
    }, (res) => {
      if (res.statusCode !== 200) {
        // Read to a cap, as every envd answer (envd-client.ts MAX_ENVD_ANSWER): a guest's root answers in envd's place.
        readCapped(req, res, MAX_ENVD_ANSWER, `envd at ${target.address} Process.Start`).then(
          (body) => { clearTimeout(timer); reject(new Error(`envd Process.Start answered ${res.statusCode}: ${body.slice(0, 200)}`)); },
          (err: Error) => { clearTimeout(timer); reject(err); },
        );
        return;
      }
      res.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        // envd's frames carry a chunk of output each; a length past MAX_FRAME is a guest's envd
        // that was replaced, which would have this process hold gigabytes (docs/runtimes.md).
        if (buffered.length >= 5 && buffered.readUInt32BE(1) > MAX_FRAME) {
          clearTimeout(timer);
          req.destroy();
          reject(new Error(`envd at ${target.address} sent a frame of ${buffered.readUInt32BE(1)} bytes, past ${MAX_FRAME}: refused`));
          return;
        }
        while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
          const flags = buffered[0]!;
          const size = buffered.readUInt32BE(1);
          let message: StartMessage;
          try {
            message = JSON.parse(buffered.subarray(5, 5 + size).toString('utf8')) as StartMessage;
          } catch {
            // Thrown in a 'data' handler, it would end the node agent: a guest's root writes these frames.
            clearTimeout(timer);
            req.destroy();
            reject(new Error(`envd at ${target.address} sent a frame that is not JSON: refused`));
            return;
          }
          buffered = buffered.subarray(5 + size);
          if (flags & 2) {
            if (message.error && exitCode === undefined && !killedAfter) stderr += `${message.error.message}\n`;
            continue;
          }
          const event = message.event ?? {};
          if (event.start) {
            pid = event.start.pid;
            if (opts.detach) { clearTimeout(timer); req.destroy(); resolve({ code: 0, stdout: '', stderr: '' }); return; }
            if (opts.inputFile) void sendInputFile(target, headers, pid, opts.inputFile).catch((err: Error) => { stderr += `stdin: ${err.message}\n`; });
          }
          if (event.data?.stdout) { const text = Buffer.from(event.data.stdout, 'base64').toString('utf8'); stdout = tail(stdout + text); opts.onOutput?.('stdout', text); }
          if (event.data?.stderr) { const text = Buffer.from(event.data.stderr, 'base64').toString('utf8'); stderr = tail(stderr + text); opts.onOutput?.('stderr', text); }
          if (event.end) exitCode = event.end.exitCode ?? (event.end.exited === false ? 137 : 0);
        }
      });
      res.on('end', () => {
        clearTimeout(timer);
        if (killedAfter) stderr += `\n(killed after ${timeoutMs} ms)`;
        resolve({ code: killedAfter ? 137 : exitCode ?? 1, stdout, stderr });
      });
      res.on('error', (err) => { clearTimeout(timer); reject(err); });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      if (opts.detach && pid !== undefined) return;
      reject(new Error(`envd at ${target.address}: ${err.message}`));
    });
    const body = Buffer.from(JSON.stringify(start));
    const envelope = Buffer.alloc(5);
    envelope.writeUInt32BE(body.length, 1);
    req.end(Buffer.concat([envelope, body]));
  });
}

interface StartMessage {
  event?: {
    start?: { pid: number };
    data?: { stdout?: string; stderr?: string };
    end?: { exitCode?: number; exited?: boolean; status?: string };
  };
  error?: { code: string; message: string };
}

async function sendInputFile(target: EnvdTarget, headers: Record<string, string>, pid: number, path: string): Promise<void> {
  for await (const chunk of createReadStream(path, { highWaterMark: 64 * 1024 })) {
    await unary(target, headers, 'SendInput', { process: { pid }, input: { stdin: (chunk as Buffer).toString('base64') } });
  }
  await unary(target, headers, 'CloseStdin', { process: { pid } });
}

async function unary(target: EnvdTarget, headers: Record<string, string>, method: string, body: unknown): Promise<void> {
  const r = await envdRequest(target.address, 'POST', `/process.Process/${method}`, { timeoutMs: 10_000, body, headers });
  if (r.status !== 200) throw new Error(`envd ${method} answered ${r.status}: ${r.body.slice(0, 200)}`);
}

/**
 * envd's POST /init with the current token and none in the body: the token is cleared (E2B's
 * /init semantics, packages/envd/src/http/init.ts), so the /init that gives the sandbox its own
 * identity needs none. No timestamp: it must not outdate the /init that follows.
 */
export async function clearEnvdToken(target: EnvdTarget & { accessToken: string }): Promise<void> {
  const r = await envdRequest(target.address, 'POST', '/init', { timeoutMs: 10_000, body: {}, headers: { 'x-access-token': target.accessToken } });
  if (r.status >= 300) throw new Error(`envd /init answered ${r.status}: ${r.body.slice(0, 200)}`);
}

/**
 * envd's POST /svc/after-restore: the guest's clock set to `timeMs` and its kernel's random pool
 * reseeded with `seed` by the helper envd started at boot (packages/envd/src/system/after-restore.ts).
 * 'unsupported' when this guest's envd has no such route (one saved before it had).
 */
export async function renewThroughEnvd(target: EnvdTarget, renewal: { timeMs: number; seed: string }): Promise<'done' | 'unsupported'> {
  const r = await envdRequest(target.address, 'POST', '/svc/after-restore', { timeoutMs: 10_000, body: renewal, headers: target.accessToken ? { 'x-access-token': target.accessToken } : {} });
  if (r.status === 404) return 'unsupported';
  if (r.status !== 204) throw new Error(`envd /svc/after-restore answered ${r.status}: ${r.body.slice(0, 200)}`);
  return 'done';
}
