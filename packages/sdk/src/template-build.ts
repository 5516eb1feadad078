/**
 * Builds a template with E2B's builder routes (docs/templates.md, "The builder"): requests the
 * build, uploads each COPY step's files through the signed URL the platform gives when it lacks
 * them, starts the steps and follows the status until the build is ready or has failed.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstat, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { promisify } from 'node:util';
import { ApiClient } from './api-client.ts';
import { readErrorBody } from './bounded-body.ts';
import type { BuildPlan } from './dockerfile.ts';
import { InvalidArgumentError, SandboxError } from './errors.ts';
import type { SandboxApiOpts } from './types.ts';

export interface BuildLogLine { timestamp: string; level: string; message: string }

export interface TemplateBuildOpts extends SandboxApiOpts {
  /** Where COPY sources are read from. */
  contextDir: string;
  cpuCount?: number;
  memoryMB?: number;
  /** Run every step again, cached or not. */
  noCache?: boolean;
  onLog?: (line: BuildLogLine) => void;
  /** Status poll interval in ms (default 500). */
  pollMs?: number;
}

export interface TemplateBuilt { templateId: string; buildId: string; name: string }

export async function buildTemplate(plan: BuildPlan, name: string, o: TemplateBuildOpts): Promise<TemplateBuilt> {
  const api = new ApiClient(o);
  const requested = await api.call('POST', '/v3/templates', { body: { name, ...(o.cpuCount ? { cpuCount: o.cpuCount } : {}), ...(o.memoryMB ? { memoryMB: o.memoryMB } : {}) }, signal: o.signal });
  const { templateID, buildID } = requested;
  const steps = [];
  for (const step of plan.steps) {
    if (step.type !== 'COPY') { steps.push(step); continue; }
    const files = await contextFiles(o.contextDir, step.args[0]!);
    const filesHash = hashFiles(files, step.args[1]!);
    const link = await api.call('GET', '/templates/{templateID}/files/{hash}', { params: { templateID, hash: filesHash }, signal: o.signal });
    if (!link.present && link.url) await upload(link.url, o.contextDir, files, o.signal);
    o.onLog?.({ timestamp: new Date().toISOString(), level: 'info', message: `${link.present ? 'Already uploaded' : 'Uploaded'}: ${step.args[0]} (${files.length} entries)` });
    steps.push({ ...step, filesHash });
  }
  const fromImage = /^(?:docker\.io\/)?e2bdev\/base(?::[\w.-]+)?$/.test(plan.fromImage) ? undefined : plan.fromImage;
  await api.call('POST', '/v2/templates/{templateID}/builds/{buildID}', {
    params: { templateID, buildID },
    body: {
      ...(fromImage ? { fromImage } : { fromTemplate: 'base' }),
      steps, force: !!o.noCache,
      ...(plan.startCmd ? { startCmd: plan.startCmd } : {}), ...(plan.readyCmd ? { readyCmd: plan.readyCmd } : {}),
    },
    signal: o.signal,
  });
  let offset = 0;
  for (;;) {
    const s = await api.call('GET', '/templates/{templateID}/builds/{buildID}/status', { params: { templateID, buildID }, query: { logsOffset: offset }, signal: o.signal });
    for (const e of s.logEntries ?? []) o.onLog?.(e);
    offset += s.logEntries?.length ?? 0;
    if (s.status === 'ready') return { templateId: templateID, buildId: buildID, name };
    if (s.status === 'error') {
      throw new SandboxError(`build ${buildID} of ${name} failed${s.reason?.step ? ` at step ${s.reason.step}` : ''}: ${s.reason?.message ?? 'no reason given'}`);
    }
    await new Promise((r) => setTimeout(r, o.pollMs ?? 500));
  }
}

interface ContextEntry { rel: string; kind: 'file' | 'dir' | 'link'; mode: number; data: Buffer }

/**
 * What a COPY source names in the context: a file, a directory with everything under it, or the
 * entries of one directory matching a `*`/`?` pattern in the last part. Paths stay inside it.
 */
async function contextFiles(contextDir: string, src: string): Promise<ContextEntry[]> {
  const clean = posix.normalize(src.replace(/^\.\//, ''));
  if (clean.startsWith('..') || posix.isAbsolute(clean)) throw new InvalidArgumentError(`COPY ${src}: the source must be inside the build context`);
  const parts = clean.split('/');
  const last = parts.pop()!;
  const roots: string[] = [];
  if (/[*?]/.test(last)) {
    const dir = parts.join('/');
    const re = new RegExp(`^${last.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
    const names = await readdir(join(contextDir, dir)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return [] as string[]; // no such directory: nothing matches
      throw err;
    });
    for (const name of names.sort()) if (re.test(name)) roots.push(dir ? `${dir}/${name}` : name);
  } else {
    roots.push(clean === '.' ? '' : clean);
  }
  if (!roots.length) throw new InvalidArgumentError(`COPY ${src}: nothing in the build context matches`);
  const out: ContextEntry[] = [];
  const walk = async (rel: string): Promise<void> => {
    const abs = join(contextDir, rel);
    const st = await lstat(abs).catch(() => { throw new InvalidArgumentError(`COPY ${src}: ${rel || '.'} is not in the build context`); });
    if (st.isSymbolicLink()) { out.push({ rel, kind: 'link', mode: st.mode, data: Buffer.from(await readlink(abs)) }); return; }
    if (st.isDirectory()) {
      if (rel) out.push({ rel, kind: 'dir', mode: st.mode, data: Buffer.alloc(0) });
      for (const name of (await readdir(abs)).sort()) await walk(rel ? `${rel}/${name}` : name);
      return;
    }
    out.push({ rel, kind: 'file', mode: st.mode, data: await readFile(abs) });
  };
  for (const r of roots) await walk(r);
  return out;
}

/** The files' identity: paths, kinds, modes and contents, and where they go. */
function hashFiles(files: ContextEntry[], dest: string): string {
  const h = createHash('sha256').update(`dest ${dest}\n`);
  for (const f of files) h.update(`${f.kind} ${f.rel} ${(f.mode & 0o7777).toString(8)} ${f.data.length}\n`).update(f.data);
  return h.digest('hex');
}

/**
 * A gzipped tar of the entries (relative to the context), PUT to the signed URL. Not through
 * ApiClient: the document's `PUT /templates/files/{hash}` takes bytes, not JSON, at the whole URL
 * the platform signed (its query is the credential; no API key is sent).
 */
async function upload(url: string, contextDir: string, files: ContextEntry[], signal?: AbortSignal): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-build-context-'));
  try {
    const archive = join(dir, 'context.tar.gz');
    const list = join(dir, 'files');
    await writeFile(list, files.map((f) => f.rel).join('\0'));
    await promisify(execFile)('tar', ['--create', '--gzip', `--file=${archive}`, '-C', contextDir, '--no-recursion', '--null', `--files-from=${list}`], { signal })
      .catch((err: Error) => { throw new SandboxError(`packing the build context failed: ${err.message}`); });
    const size = (await stat(archive)).size;
    const res = await fetch(url, { method: 'PUT', body: createReadStream(archive) as unknown as RequestInit['body'], headers: { 'content-length': String(size), 'content-type': 'application/gzip' }, duplex: 'half', signal } as RequestInit);
    // Its head only: the upload URL may point anywhere, and an endless error body grew this process.
    if (!res.ok) throw new SandboxError(`uploading the build context answered ${res.status}: ${(await readErrorBody(res, 4096)).slice(0, 200)}`);
    await res.body?.cancel();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

