/** `svc tpl ...`: build templates from images and manage them. */
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import { buildTemplate, planFromDockerfile, Template, type JobInfo, type TemplateCreateOpts, type TemplateInfo } from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import { formatBytes } from '../output.ts';
import { buildReporter } from '../progress.ts';

interface CreateFlags {
  image?: string;
  ociLayout?: string;
  archive?: string;
  rootfsTar?: string;
  alias?: string;
  registryUser?: string;
  registryPassword?: string;
  insecureRegistry?: boolean;
  platform?: string;
  svcCa: boolean;
  wait: boolean;
  startCmd?: string;
  readyCmd?: string;
  runtime?: 'gvisor' | 'microvm';
}

export function templateCommand(): Command {
  const cmd = new Command('tpl').alias('template').description('build and manage templates');

  cmd.command('create')
    .description('build a template from an image (exactly one source)')
    .option('--image <ref>', 'registry image reference')
    .option('--oci-layout <dir>', 'OCI image layout directory')
    .option('--archive <file>', 'docker-archive tarball (docker save)')
    .option('--rootfs-tar <file>', 'root filesystem tarball')
    .option('--alias <alias>', 'stable name: a-z, 0-9 and -, at most 64')
    .option('--registry-user <user>', 'registry user name')
    // From SVC_REGISTRY_PASSWORD too: an argument is on the host's process list and in the shell's history.
    .addOption(new Option('--registry-password <password>', 'registry password').env('SVC_REGISTRY_PASSWORD'))
    .option('--insecure-registry', 'pull over plain HTTP')
    .option('--platform <os/arch>', 'image platform (default: the host\'s)')
    .option('--no-svc-ca', 'do not bake the egress root CA into the image')
    .option('--start-cmd <command>', 'started in each sandbox of the template; a create answers once --ready-cmd passes')
    .option('--ready-cmd <command>', 'exits 0 once the start command is up (needs --start-cmd)')
    .addOption(new Option('--runtime <kind>', "what runs its sandboxes when a create names none (default: the node's; docs/runtimes.md)").choices(['gvisor', 'microvm']))
    .option('--no-wait', 'return once the build is accepted')
    .action(async (flags: CreateFlags, c: Command) => createTemplate(contextOf(c), flags));

  cmd.command('list').alias('ls')
    .description('list templates')
    .action(async (_f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const all = await Template.list(ctx.conn);
      ctx.out.result(all, () => ctx.out.table(all, [
        { header: 'ID', value: (t) => t.templateId },
        { header: 'ALIAS', value: (t) => t.alias },
        { header: 'STATUS', value: (t) => t.status },
        { header: 'SOURCE', value: (t) => t.sourceImageRef },
        { header: 'CREATED', value: (t) => t.createdAt },
      ], 'no templates'));
    });

  cmd.command('info <id>')
    .description('show a template (id or alias)')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const info = await Template.get(id, ctx.conn);
      ctx.out.result(info, () => printTemplate(ctx, info));
    });

  cmd.command('status <jobId>')
    .description('show a build job')
    .action(async (jobId: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const job = await Template.status(jobId, ctx.conn);
      ctx.out.result(job, () => printJob(ctx, job));
    });

  cmd.command('redo <id>')
    .description('rebuild or redistribute a template')
    .option('--no-wait', 'return once the rebuild is accepted')
    .action(async (id: string, flags: { wait: boolean }, c: Command) => {
      const ctx = contextOf(c);
      const ref = await Template.redo(id, ctx.conn);
      await finishBuild(ctx, ref.templateId, ref.jobId, flags.wait);
    });

  cmd.command('build <name>')
    .description('build a template from a Dockerfile with the template builder (name or name:tag), as `e2b template create` does')
    .option('-p, --path <dir>', 'build context: where COPY sources are read from', '.')
    .option('-d, --dockerfile <file>', 'the Dockerfile (default: e2b.Dockerfile or Dockerfile in the context)')
    .option('-c, --cmd <command>', 'start command of its sandboxes (instead of the Dockerfile\'s CMD)')
    .option('--ready-cmd <command>', 'command that exits 0 once the start command is up')
    .option('--cpu-count <n>', 'vCPUs of the build and of its sandboxes', (v) => Number(v))
    .option('--memory-mb <n>', 'memory of the build and of its sandboxes', (v) => Number(v))
    .option('--no-cache', 'run every step again')
    .action(async (name: string, f: BuildFlags, c: Command) => {
      const ctx = contextOf(c);
      await buildFromDockerfile(ctx, name, f);
    });

  cmd.command('merge <id>')
    .description('migrate a legacy artifact into the template store')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const info = await Template.migrate(id, ctx.conn);
      ctx.out.result(info, () => printTemplate(ctx, info));
    });

  cmd.command('alias <id> [alias]')
    .description('set the alias; without one, clear it')
    .action(async (id: string, alias: string | undefined, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const info = await Template.setAlias(id, alias, ctx.conn);
      ctx.out.result(info, () => ctx.out.line(info.alias ? `${info.templateId} is now ${info.alias}` : `${info.templateId} has no alias`));
    });

  cmd.command('delete <id>').alias('rm')
    .description('delete a template')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      if (!(await Template.delete(id, ctx.conn))) throw new CliError(`template ${id} not found`);
      ctx.out.result({ templateId: id, deleted: true }, () => ctx.out.line(`deleted ${id}`));
    });

  return cmd;
}

interface BuildFlags {
  path: string;
  dockerfile?: string;
  cmd?: string;
  readyCmd?: string;
  cpuCount?: number;
  memoryMb?: number;
  cache: boolean;
}

async function buildFromDockerfile(ctx: Context, name: string, f: BuildFlags): Promise<void> {
  const contextDir = resolve(f.path);
  const file = f.dockerfile ? resolve(f.dockerfile) : ['e2b.Dockerfile', 'Dockerfile'].map((n) => resolve(contextDir, n)).find((p) => existsSync(p));
  if (!file || !existsSync(file)) throw new UsageError(`no Dockerfile: give --dockerfile, or put e2b.Dockerfile or Dockerfile in ${contextDir}`);
  for (const [flag, v] of [['--cpu-count', f.cpuCount], ['--memory-mb', f.memoryMb]] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v > 0)) throw new UsageError(`${flag} takes a positive whole number`);
  }
  if (f.readyCmd && !f.cmd) throw new UsageError('--ready-cmd goes with --cmd');
  const plan = planFromDockerfile(readFileSync(file, 'utf8'));
  if (f.cmd) { plan.startCmd = f.cmd; plan.readyCmd = f.readyCmd; }
  for (const k of plan.ignored) process.stderr.write(`svc: ${k} is not supported by the builder; it was left out\n`);
  const built = await buildTemplate(plan, name, {
    ...ctx.conn, contextDir, noCache: !f.cache, ...(f.cpuCount ? { cpuCount: f.cpuCount } : {}), ...(f.memoryMb ? { memoryMB: f.memoryMb } : {}),
    onLog: (l) => { if (!ctx.out.json) ctx.out.line(`${l.timestamp.slice(11, 19)} ${l.level === 'info' ? '' : `${l.level} `}${l.message}`); },
  });
  ctx.out.result(built, () => ctx.out.fields([['template', built.templateId], ['build', built.buildId], ['name', built.name]]));
}

function createSpec(f: CreateFlags): TemplateCreateOpts {
  const sources = [
    f.image !== undefined && { image: f.image },
    f.ociLayout !== undefined && { ociLayout: resolve(f.ociLayout) },
    f.archive !== undefined && { dockerArchive: resolve(f.archive) },
    f.rootfsTar !== undefined && { rootfsTar: resolve(f.rootfsTar) },
  ].filter((s) => !!s);
  if (sources.length !== 1) throw new UsageError('give exactly one of --image, --oci-layout, --archive, --rootfs-tar');
  // SVC_REGISTRY_PASSWORD left in the environment counts only with --registry-user: a public image needs neither.
  const password = f.registryUser ? f.registryPassword : undefined;
  if (f.registryUser && !password) throw new UsageError('--registry-user needs --registry-password (or SVC_REGISTRY_PASSWORD)');
  if (f.platform && !/^[a-z0-9]+\/[a-z0-9_]+(\/[a-z0-9]+)?$/.test(f.platform)) throw new UsageError('--platform must look like os/arch[/variant]');
  if (f.alias && !/^[a-z0-9-]{1,64}$/.test(f.alias)) throw new UsageError('--alias takes 1 to 64 characters of a-z, 0-9 and -');
  const spec = { ...sources[0] } as TemplateCreateOpts;
  if (f.alias) spec.alias = f.alias;
  if (f.registryUser && password) spec.registryAuth = { username: f.registryUser, password };
  if (f.insecureRegistry) spec.insecureRegistry = true;
  if (f.platform) spec.platform = f.platform;
  if (!f.svcCa) spec.withSvcCa = false;
  if (f.readyCmd !== undefined && f.startCmd === undefined) throw new UsageError('--ready-cmd needs --start-cmd');
  if (f.startCmd !== undefined) spec.startCmd = f.startCmd;
  if (f.readyCmd !== undefined) spec.readyCmd = f.readyCmd;
  if (f.runtime) spec.runtime = f.runtime;
  return spec;
}

async function createTemplate(ctx: Context, f: CreateFlags): Promise<void> {
  const ref = await Template.create(createSpec(f), ctx.conn);
  await finishBuild(ctx, ref.templateId, ref.jobId, f.wait, ref.status);
}

/** Waits for the build with progress (unless told not to) and prints the outcome. */
async function finishBuild(ctx: Context, templateId: string, jobId: string, wait: boolean, status = 'PENDING'): Promise<void> {
  if (!wait) {
    ctx.out.result({ templateId, jobId, status }, () => ctx.out.fields([['template', templateId], ['job', jobId], ['status', status]]));
    return;
  }
  const reporter = ctx.out.json ? undefined : buildReporter();
  let job: JobInfo;
  try {
    job = await Template.waitForBuild(jobId, { ...ctx.conn, pollMs: pollInterval(), onProgress: (j) => reporter?.update(j) });
  } finally {
    reporter?.stop();
  }
  const template = await Template.get(templateId, ctx.conn);
  ctx.out.result({ template, job }, () => printTemplate(ctx, template));
}

/** How often a waiting build is polled: SVC_POLL_INTERVAL_MS, default 500 ms. */
function pollInterval(): number {
  const ms = Number(process.env.SVC_POLL_INTERVAL_MS);
  return Number.isFinite(ms) && ms > 0 ? ms : 500;
}

function printTemplate(ctx: Context, t: TemplateInfo): void {
  ctx.out.fields([
    ['id', t.templateId],
    ['alias', t.alias],
    ['status', t.status],
    ['source', t.sourceImageRef],
    ['latest job', t.latestJobId],
    ['artifact', t.artifactId],
    ['cpu', t.cpuCount],
    ['memory', t.memoryMB === undefined ? undefined : `${t.memoryMB} MiB`],
    ['disk', t.diskSizeMB === undefined ? undefined : `${t.diskSizeMB} MiB`],
    ['svc CA', t.withSvcCa === undefined ? undefined : t.withSvcCa ? 'baked in' : 'no'],
    ['start command', t.startCmd],
    ['ready command', t.readyCmd],
    ['runtime', t.runtime],
    ['created', t.createdAt],
    ['updated', t.updatedAt],
    ['error', t.error],
  ]);
}

function printJob(ctx: Context, j: JobInfo): void {
  ctx.out.fields([
    ['job', j.jobId],
    ['template', j.templateId],
    ['kind', j.kind],
    ['status', j.status],
    ['phase', j.phase],
    ['message', j.progress.message],
    ['error', j.error],
    ['created', j.createdAt],
    ['finished', j.finishedAt],
  ]);
  if (j.progress.layers.length) {
    ctx.out.line();
    ctx.out.table(j.progress.layers, [
      { header: 'LAYER', value: (l) => l.digest },
      { header: 'PULLED', value: (l) => formatBytes(l.doneBytes) },
      { header: 'SIZE', value: (l) => formatBytes(l.totalBytes) },
    ]);
  }
}
