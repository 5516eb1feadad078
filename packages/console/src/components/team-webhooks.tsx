import { useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { errorText } from '../api.ts';
import { ConfirmDialog } from './confirm.tsx';
import { relative, when } from './format.ts';
import { ErrorNote, Loading, Section, StatusNote } from './notes.tsx';
import { usePoll } from './poll.ts';
import { WebhookForm } from './team-webhook-form.tsx';

/** E2B's webhook without its secret, with svc's last delivery (packages/contracts/src/events.ts, WireWebhook). */
interface Webhook {
  id: string;
  name: string;
  createdAt: string;
  enabled: boolean;
  url: string;
  events: string[];
  lastDelivery?: { at: string; eventId: string; outcome: 'delivered' | 'retrying' | 'failed'; status?: number; error?: string };
}

/** The team's webhooks: create, enable or disable, delete; each one's last delivery. */
export function Webhooks({ api }: { api: Api }) {
  const list = usePoll(() => api.get<Webhook[]>('/events/webhooks'), 10_000, [api]);
  const [status, setStatus] = useState<string>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState<string>();
  const [pending, setPending] = useState<Webhook>();

  async function act(w: Webhook, what: string, call: () => Promise<unknown>, done: string) {
    setBusy(w.id);
    setError(undefined);
    try {
      await call();
      setStatus(done);
      list.reload();
    } catch (err) {
      setError(`Could not ${what} webhook ${w.name}: ${errorText(err)}`);
    } finally {
      setBusy(undefined);
    }
  }
  const path = (w: Webhook) => `/events/webhooks/${encodeURIComponent(w.id)}`;
  const setEnabled = (w: Webhook, enabled: boolean) =>
    act(w, enabled ? 'enable' : 'disable', () => api.patch(path(w), { enabled }), `Webhook ${w.name} ${enabled ? 'enabled' : 'disabled'}`);
  const remove = (w: Webhook) => { setPending(undefined); return act(w, 'delete', () => api.delete(path(w)), `Webhook ${w.name} deleted`); };

  const rows = list.data ?? [];
  return (
    <Section title="Webhooks">
      <p class="muted">Each sandbox lifecycle event of the types chosen is POSTed to the URL, signed with the secret (the e2b-signature header); a failed delivery is tried 3 more times.</p>
      <WebhookForm api={api} onCreated={(name) => { setStatus(`Webhook ${name} created`); list.reload(); }} />
      <ErrorNote error={error ?? list.error} />
      <StatusNote text={status} />
      {list.loading && !list.data ? <Loading what="webhooks" /> : null}
      <div class="table-wrap">
        {/* Named by aria-label: the section's heading already shows the name. */}
        <table aria-label="Webhooks">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col" class="hide-narrow">URL</th>
              <th scope="col" class="hide-narrow">Events</th>
              <th scope="col">Enabled</th>
              <th scope="col">Last delivery</th>
              <th scope="col"><span class="muted">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {rows.map((w) => (
              <tr key={w.id}>
                <td>{w.name}</td>
                <td class="hide-narrow mono url">{w.url}</td>
                <td class="hide-narrow">{w.events.map((e) => e.replace(/^sandbox\.lifecycle\./, '')).join(', ')}</td>
                <td>{w.enabled ? 'yes' : 'no'}</td>
                <td><Delivery d={w.lastDelivery} /></td>
                <td>
                  <div class="actions">
                    <button type="button" disabled={busy === w.id} aria-label={`${w.enabled ? 'Disable' : 'Enable'} webhook ${w.name}`} onClick={() => void setEnabled(w, !w.enabled)}>
                      {w.enabled ? 'Disable' : 'Enable'}
                    </button>
                    <button type="button" class="danger" disabled={busy === w.id} aria-label={`Delete webhook ${w.name}`} onClick={() => setPending(w)}>Delete</button>
                  </div>
                </td>
              </tr>
            ))}
            {list.data && rows.length === 0 ? <tr><td colSpan={6} class="muted">No webhooks yet.</td></tr> : null}
          </tbody>
        </table>
      </div>
      {pending ? (
        <ConfirmDialog
          open
          title="Delete webhook?"
          text={`Webhook ${pending.name} (${pending.url}) will be deleted: no more events are sent to it.`}
          confirmLabel="Delete webhook"
          onConfirm={() => void remove(pending)}
          onCancel={() => setPending(undefined)}
        />
      ) : null}
    </Section>
  );
}

function Delivery({ d }: { d: Webhook['lastDelivery'] }) {
  if (!d) return <span class="muted">none yet</span>;
  return (
    <span title={`${when(d.at)}, event ${d.eventId}${d.error ? `: ${d.error}` : ''}`}>
      <span class={`badge ${d.outcome}`}>{d.outcome}</span>
      {d.status !== undefined ? ` HTTP ${d.status}` : ''}
      <span class="muted"> {relative(d.at)}</span>
      {d.error ? <div class="muted small">{d.error}</div> : null}
    </span>
  );
}
