/** `svc volume ...`: create, list, show and delete persistent volumes (mount them with the SDK's volumeMounts). */
import { Command } from 'commander';
import { Volume, type VolumeAndToken } from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { CliError } from '../errors.ts';

function printVolume(ctx: Context, v: VolumeAndToken): void {
  const shown = { volumeId: v.volumeId, name: v.name, token: v.token };
  ctx.out.result(shown, () => ctx.out.fields([['id', v.volumeId], ['name', v.name], ['token', v.token]]));
}

export function volumeCommand(): Command {
  const cmd = new Command('volume').alias('vol').description('persistent volumes');

  cmd.command('create [name]')
    .description('create a volume (letters, digits, _ and -; without a name the server names it by its id)')
    .option('--driver <driver>', 'the volume plugin (default: the platform\'s first)')
    .action(async (name: string | undefined, flags: { driver?: string }, c: Command) => {
      const ctx = contextOf(c);
      const vol = await Volume.create(name, { ...ctx.conn, ...(flags.driver !== undefined ? { driver: flags.driver } : {}) });
      printVolume(ctx, vol);
    });

  cmd.command('list').alias('ls').description('list volumes')
    .action(async (_f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const volumes = await Volume.list(ctx.conn);
      ctx.out.result(volumes, () => ctx.out.table(volumes, [
        { header: 'ID', value: (v) => v.volumeId },
        { header: 'NAME', value: (v) => v.name },
      ], 'no volumes'));
    });

  cmd.command('info <ref>').description('show a volume (by id or name) and its token')
    .action(async (ref: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      printVolume(ctx, await Volume.getInfo(ref, ctx.conn));
    });

  cmd.command('delete <ref>').alias('rm').description('delete a volume (by id or name) and its data; refused while a sandbox mounts it')
    .action(async (ref: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      if (!(await Volume.destroy(ref, ctx.conn))) throw new CliError(`volume ${ref} not found`);
      ctx.out.result({ volume: ref, deleted: true }, () => ctx.out.line(`deleted ${ref}`));
    });

  return cmd;
}
