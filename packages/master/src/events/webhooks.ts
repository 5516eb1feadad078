import { randomUUID } from 'node:crypto';
import { conflict, notFound } from '@svc/common';
import { EVENT_LIMITS, type SandboxEventType, type WebhookDeliveryOutcome, type WireWebhook } from '@svc/contracts/events';
import type { Sealer } from '../vault/vault.ts';
import type { WebhookDbRow, WebhookRepo } from './webhook-repo.ts';
import type { WebhookTargets } from './webhook-target.ts';

export interface NewWebhook {
  name: string;
  url: string;
  enabled: boolean;
  events: SandboxEventType[];
  signatureSecret: string;
}

/**
 * A team's webhooks (E2B's `/events/webhooks`): the URL checked against the platform's own
 * endpoints and the sandbox pools when saved (webhook-target.ts), the signature secret sealed by
 * the vault and never answered.
 */
export class WebhookService {
  constructor(private readonly d: { repo: WebhookRepo; targets: WebhookTargets; vault: Sealer }) {}

  async create(teamId: string, input: NewWebhook): Promise<WireWebhook> {
    await this.d.targets.check(input.url);
    const full = () => conflict(`the team has ${EVENT_LIMITS.webhooksPerTeam} webhooks, the most it may have; delete one first`);
    if (await this.d.repo.count(teamId) >= EVENT_LIMITS.webhooksPerTeam) throw full();
    const id = randomUUID();
    const now = Date.now();
    const row = {
      webhook_id: id, team_id: teamId, name: input.name, url: input.url, enabled: input.enabled ? 1 : 0, events: JSON.stringify(input.events),
      sealed_secret: this.d.vault.seal(input.signatureSecret, sealContext(id)), last_delivery: null, created_at: now, updated_at: now,
    };
    await this.d.repo.insert(row);
    // Counted again after the insert: of creates sent together, the last to count sees every row
    // inserted before it, so no interleaving keeps more than the limit (several at once may all
    // step back, and are 409s to retry). Before 2026-11-30 they could all pass the count above.
    if (await this.d.repo.count(teamId) > EVENT_LIMITS.webhooksPerTeam) {
      await this.d.repo.delete(teamId, id);
      throw full();
    }
    return toWire(row);
  }

  async list(teamId: string): Promise<WireWebhook[]> {
    return (await this.d.repo.list(teamId)).map(toWire);
  }

  async get(teamId: string, id: string): Promise<WireWebhook> {
    return toWire(await this.row(teamId, id));
  }

  /** The fields given replace the old (E2B's PATCH); a new URL is checked as a new webhook's is. */
  async update(teamId: string, id: string, patch: Partial<NewWebhook>): Promise<WireWebhook> {
    await this.row(teamId, id);
    if (patch.url !== undefined) await this.d.targets.check(patch.url);
    const updated = await this.d.repo.update(teamId, id, {
      ...(patch.name === undefined ? {} : { name: patch.name }),
      ...(patch.url === undefined ? {} : { url: patch.url }),
      ...(patch.enabled === undefined ? {} : { enabled: patch.enabled ? 1 : 0 }),
      ...(patch.events === undefined ? {} : { events: JSON.stringify(patch.events) }),
      ...(patch.signatureSecret === undefined ? {} : { sealed_secret: this.d.vault.seal(patch.signatureSecret, sealContext(id)) }),
      updated_at: Date.now(),
    });
    if (!updated) throw gone(id);
    return this.get(teamId, id);
  }

  async delete(teamId: string, id: string): Promise<void> {
    if (!(await this.d.repo.delete(teamId, id))) throw gone(id);
  }

  private async row(teamId: string, id: string): Promise<WebhookDbRow> {
    const row = await this.d.repo.get(teamId, id);
    if (!row) throw gone(id);
    return row;
  }
}

/** The vault's context for a webhook's secret: a sealed secret opens for its own webhook only. */
export function sealContext(webhookId: string): string {
  return `webhook:${webhookId}`;
}

const gone = (id: string) => notFound(`webhook ${id} not found`);

function toWire(r: WebhookDbRow): WireWebhook {
  return {
    id: r.webhook_id, teamID: r.team_id, name: r.name, createdAt: new Date(Number(r.created_at)).toISOString(), enabled: r.enabled === 1,
    url: r.url, events: JSON.parse(r.events) as SandboxEventType[],
    ...(r.last_delivery ? { lastDelivery: JSON.parse(r.last_delivery) as WebhookDeliveryOutcome } : {}),
  };
}
