/** `svc team ...` and `svc key ...`: teams, their limits and their API keys (docs/security.md). */
import { Command } from 'commander';
import { ApiKey, Team, type TeamLimits, type TeamRecord } from '@svc/sdk';
import { contextOf } from '../context.ts';
import { CliError } from '../errors.ts';

const LIMIT_FLAGS: Array<[flag: string, key: keyof TeamLimits, what: string]> = [
  ['--max-sandboxes <n>', 'maxSandboxes', 'concurrent sandboxes'],
  ['--max-memory-mb <mb>', 'maxMemoryMB', 'total sandbox memory in MB'],
  ['--max-vcpus <n>', 'maxVcpus', 'total sandbox vCPUs'],
  ['--max-builds <n>', 'maxConcurrentBuilds', 'template builds at once'],
  ['--max-requests-per-min <n>', 'maxRequestsPerMinute', 'API requests a minute'],
  ['--max-kept-sandboxes <n>', 'maxKeptSandboxes', 'sandboxes kept, running or paused'],
  ['--max-snapshots <n>', 'maxSnapshots', 'snapshots kept'],
  ['--max-volumes <n>', 'maxVolumes', 'persistent volumes kept'],
];

function withLimitFlags(cmd: Command): Command {
  for (const [flag, , what] of LIMIT_FLAGS) cmd.option(flag, `${what} (0: no limit)`);
  return cmd;
}

function limitsFrom(flags: Record<string, string | undefined>): Partial<TeamLimits> {
  const out: Partial<TeamLimits> = {};
  for (const [flag, key] of LIMIT_FLAGS) {
    const prop = flag.split(' ')[0]!.slice(2).replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
    const v = flags[prop];
    if (v === undefined) continue;
    if (!/^\d+$/.test(v)) throw new CliError(`${flag.split(' ')[0]} must be a whole number, 0 or more`);
    out[key] = Number(v);
  }
  return out;
}

const limitsText = (t: TeamRecord) => Object.entries(t.limits).filter(([, n]) => n > 0).map(([k, n]) => `${k}=${n}`).join(' ') || 'none';

export function teamCommand(): Command {
  const cmd = new Command('team').description('teams and their limits (the admin key)');

  withLimitFlags(cmd.command('create <name>').description('make a team and its first API key (shown once)'))
    .action(async (name: string, flags: Record<string, string>, c: Command) => {
      const ctx = contextOf(c);
      const made = await Team.create(name, { ...ctx.conn, limits: limitsFrom(flags) });
      ctx.out.result({ teamId: made.teamId, apiKey: made.apiKey, apiKeyId: made.apiKeyId }, () => {
        ctx.out.line(`team ${name}: ${made.teamId}`);
        ctx.out.line(`API key (shown once): ${made.apiKey}`);
      });
    });

  cmd.command('list').alias('ls').description('list teams')
    .action(async (_f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const teams = await Team.list(ctx.conn);
      ctx.out.result(teams, () => ctx.out.table(teams, [
        { header: 'ID', value: (t) => t.teamId },
        { header: 'NAME', value: (t) => t.name },
        { header: 'DEFAULT', value: (t) => (t.isDefault ? 'yes' : '') },
        { header: 'LIMITS', value: limitsText },
      ], 'no teams'));
    });

  withLimitFlags(cmd.command('limits <teamId>').description('change a team\'s limits'))
    .action(async (teamId: string, flags: Record<string, string>, c: Command) => {
      const ctx = contextOf(c);
      const limits = limitsFrom(flags);
      if (Object.keys(limits).length === 0) throw new CliError('name at least one limit, e.g. --max-sandboxes 10');
      const t = await Team.setLimits(teamId, limits, ctx.conn);
      ctx.out.result(t, () => ctx.out.line(`${t.name}: ${limitsText(t)}`));
    });
  return cmd;
}

export function keyCommand(): Command {
  const cmd = new Command('key').description('API keys');

  cmd.command('create').description('make an API key for a team (shown once)')
    .requiredOption('--team <teamId>', 'the team')
    .option('--name <name>', 'what the key is for')
    .action(async (flags: { team: string; name?: string }, c: Command) => {
      const ctx = contextOf(c);
      const k = await ApiKey.create(flags.team, { ...ctx.conn, ...(flags.name ? { name: flags.name } : {}) });
      ctx.out.result({ teamId: k.teamId, apiKey: k.apiKey, apiKeyId: k.keyId }, () => ctx.out.line(`API key ${k.keyId} (shown once): ${k.apiKey}`));
    });

  cmd.command('list').alias('ls').description('list API keys (never their values)')
    .option('--team <teamId>', 'only this team\'s')
    .action(async (flags: { team?: string }, c: Command) => {
      const ctx = contextOf(c);
      const keys = await ApiKey.list({ ...ctx.conn, ...(flags.team ? { teamId: flags.team } : {}) });
      ctx.out.result(keys, () => ctx.out.table(keys, [
        { header: 'ID', value: (k) => k.keyId },
        { header: 'TEAM', value: (k) => k.teamId },
        { header: 'NAME', value: (k) => k.name },
        { header: 'KEY', value: (k) => `e2b_${k.mask.maskedValuePrefix}…${k.mask.maskedValueSuffix}` },
        { header: 'LAST USED', value: (k) => k.lastUsedAt ?? '' },
      ], 'no keys'));
    });

  cmd.command('revoke <keyId>').description('revoke an API key (refused everywhere within a second)')
    .action(async (keyId: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      if (!(await ApiKey.revoke(keyId, ctx.conn))) throw new CliError(`no API key ${keyId}`);
      ctx.out.result({ keyId, revoked: true }, () => ctx.out.line(`revoked ${keyId}`));
    });
  return cmd;
}
