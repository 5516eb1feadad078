/**
 * What became of the sandbox behind a terminal, from its lifecycle events (newest first). Asked
 * instead of GET /sandboxes/<id>, whose 404 for a killed sandbox the browser reports as an error.
 */
import { errorText, type Api } from '../api.ts';
import { CONNECTION_LOST } from './envd-pty.ts';

interface LifecycleEvent {
  type: string;
  eventData?: { reason?: string } | null;
}

const LIFECYCLE = ['sandbox.lifecycle.created', 'sandbox.lifecycle.resumed', 'sandbox.lifecycle.paused', 'sandbox.lifecycle.killed'];

/** The sandbox's latest lifecycle change (created, resumed, paused, killed). */
async function latestChange(api: Api, sandboxId: string): Promise<LifecycleEvent | undefined> {
  const events = await api.get<LifecycleEvent[]>(`/events/sandboxes/${encodeURIComponent(sandboxId)}`, { limit: 20 });
  return events.find((e) => LIFECYCLE.includes(e.type));
}

/** Whether the sandbox is paused or gone: a request to it then would be refused, or would wake it. */
export async function sandboxStopped(api: Api, sandboxId: string): Promise<boolean> {
  const last = await latestChange(api, sandboxId);
  return last?.type === 'sandbox.lifecycle.paused' || last?.type === 'sandbox.lifecycle.killed';
}

/**
 * Why a stream broke, in words: the sandbox was killed or paused, else the connection was lost.
 * The stream can break a moment before the kill is recorded, so a running sandbox is asked again briefly.
 */
export async function whyLost(api: Api, sandboxId: string): Promise<string> {
  for (let attempt = 0; attempt < 4; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, 500));
    let last: LifecycleEvent | undefined;
    try {
      last = await latestChange(api, sandboxId);
    } catch (err) {
      console.warn(`terminal: could not read the events of sandbox ${sandboxId} after its stream broke: ${errorText(err)}`);
      return CONNECTION_LOST;
    }
    if (last?.type === 'sandbox.lifecycle.paused') return 'the sandbox was paused';
    if (last?.type === 'sandbox.lifecycle.killed') {
      const reason = last.eventData?.reason;
      return `the sandbox was killed${reason && reason !== 'killed' ? ` (${reason})` : ''}`;
    }
  }
  return CONNECTION_LOST;
}
