/** `svc webhook ...`: the webhooks the team's sandbox lifecycle events are POSTed to, signed with their secret. */
import { Command, Option } from 'commander';
import { SANDBOX_EVENT_TYPES, Webhooks, type Webhook, type WebhookDeliveryOutcome, type WebhookUpdate } from '@svc/sdk';
import { contextOf, type Context } from '../context.ts';
import { CliError, UsageError } from '../errors.ts';
import { collect, parseEventTypes, shortEventType } from '../parse.ts';

interface WebhookFlags {
  name?: string;
  url?: string;
  event?: string[];
  secret?: string;
  disabled?: boolean;
  enable?: boolean;
  disable?: boolean;
}

const EVENT_HELP = `an event type to deliver: ${SANDBOX_EVENT_TYPES.map(shortEventType).join(', ')} (repeatable, or a comma list)`;
const SECRET_HELP = 'the secret each delivery is signed with (the e2b-signature header); never shown again';
/** The secret from SVC_WEBHOOK_SECRET too: an argument is on the host's process list and in the shell's history. */
const secretOption = () => new Option('--secret <secret>', SECRET_HELP).env('SVC_WEBHOOK_SECRET');

const eventsText = (w: Webhook) => w.events.map(shortEventType).join(',');

function deliveryText(d: WebhookDeliveryOutcome | undefined): string {
  if (!d) return 'never';
  const status = d.status === undefined ? '' : ` HTTP ${d.status}`;
  return `${d.outcome}${status} at ${d.at}${d.error ? `: ${d.error}` : ''}`;
}

function printWebhook(ctx: Context, w: Webhook): void {
  ctx.out.result(w, () => ctx.out.fields([
    ['id', w.id],
    ['name', w.name],
    ['url', w.url],
    ['enabled', w.enabled ? 'yes' : 'no'],
    ['events', eventsText(w)],
    ['created', w.createdAt],
    ['last delivery', deliveryText(w.lastDelivery)],
    ['of event', w.lastDelivery?.eventId],
  ]));
}

export function webhookCommand(): Command {
  const cmd = new Command('webhook').description('webhooks that receive sandbox lifecycle events');

  cmd.command('create')
    .description('register a webhook: each event of its types is POSTed to its URL')
    .requiredOption('--name <name>', 'what it is for (1 to 256 characters)')
    .requiredOption('--url <url>', 'the http or https URL the events are POSTed to')
    .requiredOption('--event <type>', EVENT_HELP, collect)
    .addOption(secretOption().makeOptionMandatory())
    .option('--disabled', 'register it without delivering anything yet')
    .action(async (flags: WebhookFlags, c: Command) => {
      const ctx = contextOf(c);
      const events = parseEventTypes(flags.event, '--event')!;
      const w = await Webhooks.create({
        name: flags.name!, url: flags.url!, events, signatureSecret: flags.secret!, ...(flags.disabled ? { enabled: false } : {}),
      }, ctx.conn);
      printWebhook(ctx, w);
    });

  cmd.command('list').alias('ls').description("list the team's webhooks")
    .action(async (_f: unknown, c: Command) => {
      const ctx = contextOf(c);
      const hooks = await Webhooks.list(ctx.conn);
      ctx.out.result(hooks, () => ctx.out.table(hooks, [
        { header: 'ID', value: (w) => w.id },
        { header: 'NAME', value: (w) => w.name },
        { header: 'ENABLED', value: (w) => (w.enabled ? 'yes' : 'no') },
        { header: 'EVENTS', value: eventsText },
        { header: 'URL', value: (w) => w.url },
        { header: 'LAST DELIVERY', value: (w) => deliveryText(w.lastDelivery) },
      ], 'no webhooks'));
    });

  cmd.command('get <id>').alias('info').description('show a webhook (never its secret)')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      printWebhook(ctx, await Webhooks.get(id, ctx.conn));
    });

  cmd.command('update <id>')
    .description('change a webhook: the options given replace its fields')
    .option('--name <name>', 'a new name')
    .option('--url <url>', 'a new URL')
    .option('--event <type>', `${EVENT_HELP}; replaces its types`, collect)
    // No variable here: one left in the environment would change the secret of every update.
    .option('--secret <secret>', SECRET_HELP)
    .option('--enable', 'deliver again')
    .option('--disable', 'stop delivering, keeping the webhook')
    .action(async (id: string, flags: WebhookFlags, c: Command) => {
      const ctx = contextOf(c);
      if (flags.enable && flags.disable) throw new UsageError('--enable and --disable cannot go together');
      const changes: WebhookUpdate = {};
      if (flags.name !== undefined) changes.name = flags.name;
      if (flags.url !== undefined) changes.url = flags.url;
      if (flags.event !== undefined) changes.events = parseEventTypes(flags.event, '--event');
      if (flags.secret !== undefined) changes.signatureSecret = flags.secret;
      if (flags.enable || flags.disable) changes.enabled = !!flags.enable;
      if (Object.keys(changes).length === 0) throw new UsageError('give at least one of --name, --url, --event, --secret, --enable, --disable');
      printWebhook(ctx, await Webhooks.update(id, changes, ctx.conn));
    });

  cmd.command('delete <id>').alias('rm').description('delete a webhook')
    .action(async (id: string, _f: unknown, c: Command) => {
      const ctx = contextOf(c);
      if (!(await Webhooks.delete(id, ctx.conn))) throw new CliError(`webhook ${id} not found`);
      ctx.out.result({ webhookId: id, deleted: true }, () => ctx.out.line(`deleted ${id}`));
    });

  return cmd;
}
