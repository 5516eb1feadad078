/** `svc node ...`: list nodes, manage their admin labels, drain them. */
import { Command } from 'commander';
import { Node, type NodeDrainResult, type NodeInfo } from '@svc/sdk';
import { contextOf } from '../context.ts';
import { CliError } from '../errors.ts';
import { formatPairs } from '../output.ts';
import { parsePairs } from '../parse.ts';

const field = (n: NodeInfo, ...path: string[]) => {
  let v: unknown = n;
  for (const p of path) v = (v as Record<string, unknown> | undefined)?.[p];
  return v === undefined || v === null ? undefined : String(v);
};

/** One line on stderr per sandbox the drain has gone over since the last status. */
function drainProgress(): (r: NodeDrainResult) => void {
  const told = { moved: 0, stored: 0, failed: 0 };
  return (r) => {
    if (told.moved + told.stored + told.failed === 0 && r.remaining === r.total) process.stderr.write(`draining ${r.node.id}: ${r.total} sandbox(es)\n`);
    for (const id of r.moved.slice(told.moved)) process.stderr.write(`  moved ${id}\n`);
    for (const id of r.stored.slice(told.stored)) process.stderr.write(`  stored ${id}\n`);
    for (const f of r.failed.slice(told.failed)) process.stderr.write(`  failed ${f.sandboxId}: ${f.message}\n`);
    Object.assign(told, { moved: r.moved.length, stored: r.stored.length, failed: r.failed.length });
  };
}

/** The drain's summary; exits 1 when a sandbox could not be moved or the drain did not finish. */
function printDrain(ctx: ReturnType<typeof contextOf>, r: NodeDrainResult): void {
  ctx.out.result(r, () => {
    ctx.out.line(`${r.node.id}: ${field(r.node, 'status')}; drain ${r.state}, ${r.total - r.remaining} of ${r.total} gone over; moved ${r.moved.length}, stored ${r.stored.length}, failed ${r.failed.length}`);
    for (const f of r.failed) ctx.out.line(`  ${f.sandboxId}: ${f.message}`);
  });
  if (r.failed.length) throw new CliError(`${r.failed.length} sandbox(es) could not be moved off ${r.node.id}; run the drain again once the reason is mended`);
  if (r.state === 'stopped') throw new CliError(`the drain of ${r.node.id} stopped: the node was undrained`);
  if (r.state === 'interrupted') throw new CliError(`the drain of ${r.node.id} was interrupted: the master running it stopped; run the drain again`);
}

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
    .description('take no new sandboxes there; move its running sandboxes to other nodes and store its paused ones (docs/cluster.md); waits for the drain, telling each sandbox on stderr')
    .option('--no-wait', 'answer once the drain has started; `svc node drain-status` follows it')
    .action(async (id: string, flags: { wait: boolean }, c: Command) => {
      const ctx = contextOf(c);
      const r = await Node.drain(id, { ...ctx.conn, wait: flags.wait, onProgress: drainProgress() });
      printDrain(ctx, r);
    });

  cmd.command('drain-status <id>')
    .description('the latest drain of a node, under way or ended')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      printDrain(ctx, await Node.drainStatus(id, ctx.conn));
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
