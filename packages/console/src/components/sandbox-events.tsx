import { bytes, metadataText, relative, when } from './format.ts';
import { Section } from './notes.tsx';
import { eventName, type SandboxEvent } from './sandbox-types.ts';

/** An event's eventData in a line: what changed, beyond what its type says. */
export function eventSummary(e: SandboxEvent): string {
  const d = e.eventData;
  if (!d) return '–';
  const parts: string[] = [];
  if (d.reason) parts.push(`reason: ${d.reason}`);
  if (d.set_timeout) parts.push(`ends ${when(d.set_timeout)}`);
  if (d.snapshot_id) parts.push(`snapshot ${d.snapshot_id}`);
  if (d.execution) {
    const x = d.execution;
    parts.push(`ran ${(x.execution_time / 1000).toFixed(1)} s on ${x.vcpu_count} vCPU, ${bytes(x.memory_mb * 1024 * 1024)}`);
  }
  if (e.type === 'sandbox.lifecycle.created' && d.sandbox_metadata && Object.keys(d.sandbox_metadata).length) {
    parts.push(`metadata ${metadataText(d.sandbox_metadata)}`);
  }
  return parts.length ? parts.join(' · ') : '–';
}

/** The sandbox's lifecycle events, newest first (the page polls them: it also reads an ended sandbox's facts from them). */
export function SandboxEvents({ events }: { events: SandboxEvent[] | undefined }) {
  return (
    <Section title="Lifecycle events">
      {events ? (
        <div class="table-wrap">
          <table aria-label="Lifecycle events">
            <thead><tr><th scope="col">Event</th><th scope="col">Time</th><th scope="col">Details</th></tr></thead>
            <tbody>
              {events.map((e) => (
                <tr key={e.id}>
                  <td><span class={`badge event ${eventName(e.type)}`}>{eventName(e.type)}</span></td>
                  <td title={when(e.timestamp)}>{when(e.timestamp)} <span class="muted hide-narrow">({relative(e.timestamp)})</span></td>
                  <td>{eventSummary(e)}</td>
                </tr>
              ))}
              {events.length ? null : <tr><td colSpan={3} class="muted">No events yet.</td></tr>}
            </tbody>
          </table>
        </div>
      ) : <p class="muted">No events of this sandbox.</p>}
    </Section>
  );
}
