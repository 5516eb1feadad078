/** `svc node ...`: list nodes, manage their admin labels, drain them. */
import { Command } from 'commander';
import { Node, type NodeInfo } from '@svc/sdk';
import { contextOf } from '../context.ts';
import { CliError } from '../errors.ts';
import { formatPairs } from '../output.ts';
import { parsePairs } from '../parse.ts';

const field = (n: NodeInfo, ...path: string[]) => {
  let v: unknown = n;
  for (const p of path) v = (v as Record<string, unknown> | undefined)?.[p];
  return v === undefined || v === null ? undefined : String(v);
};

export function nodeCommand(): Command {
  const cmd = new Command('node').description('compute nodes and their labels');

  cmd.command('list').alias('ls')
    .description('list nodes')
    .action(async (_f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const nodes = await Node.list(ctx.conn);
      ctx.out.result(nodes, () => ctx.out.table(nodes, [
        { header: 'ID', value: (n) => n.id },
        { header: 'STATUS', value: (n) => field(n, 'status') },
        { header: 'RUNTIMES', value: (n) => (Array.isArray(n.runtimes) ? n.runtimes.join(',') : field(n, 'runtime')) },
        { header: 'ADDRESS', value: (n) => field(n, 'address') },
        { header: 'RUNNING', value: (n) => field(n, 'usage', 'running') },
        { header: 'PAUSED', value: (n) => field(n, 'usage', 'paused') },
        { header: 'MEMORY MB (USED/CAPACITY)', value: (n) => (field(n, 'capacity', 'memoryMB') === undefined ? undefined : `${field(n, 'usage', 'usedMemoryMB') ?? 0}/${field(n, 'capacity', 'memoryMB')}`) },
        { header: 'LABELS', value: (n) => formatPairs(n.labels) },
      ], 'no nodes'));
    });

  cmd.command('label <id> <labels...>')
    .description('add or replace labels (key=value ...)')
    .action(async (id: string, pairs: string[], _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const node = await Node.label(id, parsePairs(pairs, 'a label') ?? {}, ctx.conn);
      if (!node) throw new CliError(`the server did not return node ${id}`);
      ctx.out.result(node, () => ctx.out.line(`${node.id}: ${formatPairs(node.labels)}`));
    });

  cmd.command('unlabel <id> <names...>')
    .description('remove labels by name')
    .action(async (id: string, names: string[], _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const node = await Node.unlabel(id, names, ctx.conn);
      if (!node) throw new CliError(`the server did not return node ${id}`);
      ctx.out.result(node, () => ctx.out.line(`${node.id}: ${formatPairs(node.labels)}`));
    });

  cmd.command('drain <id>')
    .description('take no new sandboxes there; move its running sandboxes to other nodes and store its paused ones (docs/cluster.md)')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const r = await Node.drain(id, ctx.conn);
      ctx.out.result(r, () => {
        ctx.out.line(`${r.node.id}: ${field(r.node, 'status')}; moved ${r.moved.length}, stored ${r.stored.length}, failed ${r.failed.length}`);
        for (const f of r.failed) ctx.out.line(`  ${f.sandboxId}: ${f.message}`);
      });
      if (r.failed.length) throw new CliError(`${r.failed.length} sandbox(es) could not be moved off ${id}; run the drain again once the reason is mended`);
    });

  cmd.command('undrain <id>')
    .description('let a drained node take new sandboxes again')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const node = await Node.undrain(id, ctx.conn);
      ctx.out.result(node, () => ctx.out.line(`${node.id}: ${field(node, 'status')}`));
    });

  return cmd;
}
