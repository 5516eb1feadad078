/** `svc snapshot ...`: list and delete snapshots (`svc sandbox snapshot` takes them). */
import { Command } from 'commander';
import { Sandbox, type SnapshotInfo } from '@svc/sdk';
import { contextOf } from '../context.ts';
import { CliError } from '../errors.ts';

export function snapshotCommand(): Command {
  const cmd = new Command('snapshot').alias('snap').description('list and delete snapshots (sandbox snapshot takes one)');

  cmd.command('list').alias('ls')
    .description('list snapshots, newest first')
    .option('--sandbox <id>', 'only those taken of this sandbox')
    .option('--name <name>', 'only the snapshot with this id or name')
    .action(async (flags: { sandbox?: string; name?: string }, c: Command) => {
      const ctx = contextOf(c);
      const pager = Sandbox.listSnapshots({ ...ctx.conn, sandboxId: flags.sandbox, name: flags.name });
      const all: SnapshotInfo[] = [];
      while (pager.hasNext) all.push(...(await pager.nextItems()));
      ctx.out.result(all, () => ctx.out.table(all, [
        { header: 'SNAPSHOT', value: (s) => s.snapshotId },
        { header: 'NAMES', value: (s) => s.names.join(',') },
      ], 'no snapshots'));
    });

  cmd.command('delete <ref>').alias('rm')
    .description('delete a snapshot by id or name (sandboxes made from it keep running)')
    .action(async (ref: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      // The route deletes templates too (E2B's DELETE /templates/{id}): make sure `ref` is a snapshot.
      const found = await Sandbox.listSnapshots({ ...ctx.conn, name: ref, limit: 1 }).nextItems();
      if (found.length === 0 || !(await Sandbox.deleteSnapshot(ref, ctx.conn))) throw new CliError(`snapshot ${ref} not found`);
      ctx.out.result({ snapshotId: ref, deleted: true }, () => ctx.out.line(`deleted ${ref}`));
    });

  return cmd;
}
