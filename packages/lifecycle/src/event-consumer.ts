import type { Coordination, Logger } from '@svc/common';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';

export interface EventConsumerDeps {
  coord: Coordination;
  logger: Logger;
  /** Only one replica (the leader) fans cache purges out to the proxies. */
  isLeader: () => boolean;
  purgeProxies: (sandboxId: string) => void;
}

/**
 * Consumes sandbox lifecycle events: records new sandboxes and, on the leader, purges the
 * proxies' cached routes when a sandbox pauses, resumes or dies by someone else's hand
 * (an API pause, a connect), so no proxy keeps sending to a stale backend.
 */
export function consumeSandboxEvents(d: EventConsumerDeps): { close(): void; created: () => number } {
  let created = 0;
  const unsubscribe = d.coord.subscribe(SANDBOX_EVENTS_TOPIC, (raw) => {
    const ev = raw as Partial<SandboxEvent>;
    if (typeof ev?.sandboxId !== 'string' || typeof ev.kind !== 'string') return;
    if (ev.kind === 'sandbox.created') {
      created++;
      d.logger.info({ sandboxId: ev.sandboxId }, 'create event applied');
      return;
    }
    if (d.isLeader()) d.purgeProxies(ev.sandboxId);
  });
  return { close: unsubscribe, created: () => created };
}
