import { useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { errorText } from '../api.ts';
import { ErrorNote } from './notes.tsx';

/** E2B's sandbox lifecycle event types (packages/contracts/src/events.ts, SANDBOX_EVENT_TYPES). */
const EVENT_TYPES = [
  'sandbox.lifecycle.created',
  'sandbox.lifecycle.updated',
  'sandbox.lifecycle.paused',
  'sandbox.lifecycle.resumed',
  'sandbox.lifecycle.killed',
  'sandbox.lifecycle.snapshotted',
] as const;

/** The body's limits (EVENT_LIMITS in events.ts). */
const MAX = { name: 256, url: 2048, secret: 1024 };

interface NewWebhook { name: string; url: string; signatureSecret: string; events: string[]; enabled: boolean }

/** What the API would refuse in a new webhook (NewWebhookBody and parseWebhookUrl), said before the call. */
function problem(w: NewWebhook): string | undefined {
  if (!w.name) return 'Give the webhook a name.';
  if (w.name.length > MAX.name) return `A webhook name has at most ${MAX.name} characters.`;
  if (!w.url) return 'Give the URL the events are sent to.';
  if (w.url.length > MAX.url) return `A webhook URL has at most ${MAX.url} characters.`;
  let url: URL;
  try {
    url = new URL(w.url);
  } catch {
    return `${w.url} is not a URL: write it whole, as https://example.com/hook.`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `The URL must be http or https, not ${url.protocol.replace(/:$/, '')}.`;
  if (url.username || url.password) return 'The URL must not carry a user or password: the secret signs each delivery.';
  if (!w.signatureSecret) return 'Give a secret: each delivery is signed with it (the e2b-signature header).';
  if (w.signatureSecret.length > MAX.secret) return `A secret has at most ${MAX.secret} characters.`;
  if (w.events.length === 0) return 'Choose at least one event.';
  return undefined;
}

/** The form that creates a webhook; `onCreated` is told its name. */
export function WebhookForm({ api, onCreated }: { api: Api; onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState('');
  const [events, setEvents] = useState<string[]>([]);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    const w: NewWebhook = { name: name.trim(), url: url.trim(), signatureSecret: secret, events, enabled: true };
    const refused = problem(w);
    setError(refused);
    if (refused) return;
    setBusy(true);
    try {
      await api.post('/events/webhooks', w);
      setName(''); setUrl(''); setSecret(''); setEvents([]);
      onCreated(w.name);
    } catch (err) {
      setError(`Could not create webhook ${w.name}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  const toggle = (t: string, on: boolean) => setEvents((ev) => (on ? [...ev.filter((x) => x !== t), t] : ev.filter((x) => x !== t)));
  const edited = () => setError(undefined);
  return (
    <form class="webhook-form" aria-label="Create a webhook" onSubmit={submit} noValidate>
      <div class="row">
        <div class="field">
          <label for="wh-name">Webhook name</label>
          <input id="wh-name" value={name} maxLength={MAX.name} autoComplete="off" onInput={(e) => { setName(e.currentTarget.value); edited(); }} />
        </div>
        <div class="field grow">
          <label for="wh-url">Webhook URL</label>
          <input id="wh-url" type="url" value={url} maxLength={MAX.url} placeholder="https://example.com/hook" autoComplete="off" onInput={(e) => { setUrl(e.currentTarget.value); edited(); }} />
        </div>
        <div class="field">
          <label for="wh-secret">Secret</label>
          <input id="wh-secret" value={secret} maxLength={MAX.secret} autoComplete="off" spellcheck={false} onInput={(e) => { setSecret(e.currentTarget.value); edited(); }} />
        </div>
      </div>
      <fieldset class="events">
        <legend>Events</legend>
        {EVENT_TYPES.map((t) => (
          <label key={t} class="check">
            <input type="checkbox" checked={events.includes(t)} onChange={(e) => { toggle(t, e.currentTarget.checked); edited(); }} />
            {t}
          </label>
        ))}
      </fieldset>
      <ErrorNote error={error} />
      <div class="actions"><button type="submit" disabled={busy}>Create webhook</button></div>
    </form>
  );
}
