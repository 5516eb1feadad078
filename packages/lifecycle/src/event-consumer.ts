import type { Coordination, Logger } from '@svc/common';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';

export interface EventConsumerDeps {
  coord: Coordination;
  logger: Logger;
}

/**
 * Consumes sandbox lifecycle events: counts the creates it has seen (its health answer). Proxies'
 * cached routes are not its business: the master purges them on every change (docs/design.md,
 * "Events and caches").
 */
export function consumeSandboxEvents(d: EventConsumerDeps): { close(): void; created: () => number } {
  let created = 0;
  const unsubscribe = d.coord.subscribe(SANDBOX_EVENTS_TOPIC, (raw) => {
    const ev = raw as Partial<SandboxEvent>;
    if (typeof ev?.sandboxId !== 'string' || ev.kind !== 'sandbox.created') return;
    created++;
    d.logger.info({ sandboxId: ev.sandboxId }, 'create event applied');
  });
  return { close: unsubscribe, created: () => created };
}
