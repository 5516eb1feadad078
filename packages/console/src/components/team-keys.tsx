import { useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { errorText } from '../api.ts';
import { ConfirmDialog } from './confirm.tsx';
import { relative, when } from './format.ts';
import { ErrorNote, Loading, Section, StatusNote } from './notes.tsx';
import { usePoll } from './poll.ts';

/** E2B's TeamAPIKey as GET /api-keys answers it (packages/api/src/team-routes.ts). */
interface ApiKey {
  id: string;
  name: string;
  mask: { prefix: string; maskedValuePrefix: string; maskedValueSuffix: string };
  createdAt: string;
  lastUsed: string | null;
}

/** A key's name: 1 to 128 printable characters (the master's check). */
const NAME_MAX = 128;

/** The master takes printable characters only. */
const isControl = (c: string) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f;
const masked = (k: ApiKey) => `${k.mask.prefix}${k.mask.maskedValuePrefix}…${k.mask.maskedValueSuffix}`;
/** Whether a listed key is the one this console signed in with (its mask fits). */
const isOwn = (k: ApiKey, key: string) => key.startsWith(k.mask.prefix + k.mask.maskedValuePrefix) && key.endsWith(k.mask.maskedValueSuffix);

/** The team's API keys: create (the key is shown once) and revoke. */
export function ApiKeys({ api }: { api: Api }) {
  const list = usePoll(() => api.get<ApiKey[]>('/api-keys'), 30_000, [api]);
  const [name, setName] = useState('');
  const [formError, setFormError] = useState<string>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState<{ name: string; key: string }>();
  const [pending, setPending] = useState<ApiKey>();

  async function create(e: Event) {
    e.preventDefault();
    const wanted = name.trim();
    const refused = !wanted ? 'Give the key a name.' : wanted.length > NAME_MAX ? `A key name has at most ${NAME_MAX} characters.` : [...wanted].some(isControl) ? 'A key name may not hold control characters.' : undefined;
    setFormError(refused);
    if (refused) return;
    setBusy(true);
    try {
      const made = await api.post<ApiKey & { key: string }>('/api-keys', { name: wanted });
      setCreated({ name: made.name, key: made.key });
      setName('');
      setStatus(`Key ${made.name} created`);
      list.reload();
    } catch (err) {
      setFormError(`Could not create key ${wanted}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  async function revoke(k: ApiKey) {
    setPending(undefined);
    setBusy(true);
    setError(undefined);
    try {
      await api.delete(`/api-keys/${encodeURIComponent(k.id)}`);
      setStatus(`Key ${k.name} revoked`);
      list.reload();
    } catch (err) {
      setError(`Could not revoke key ${k.name}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  const rows = list.data ?? [];
  return (
    <Section title="API keys">
      <form class="row" aria-label="Create an API key" onSubmit={create} noValidate>
        <div class="field">
          <label for="key-name">Key name</label>
          <input id="key-name" value={name} maxLength={NAME_MAX} autoComplete="off" onInput={(e) => { setName(e.currentTarget.value); setFormError(undefined); }} />
        </div>
        <button type="submit" disabled={busy}>Create key</button>
      </form>
      <ErrorNote error={formError} />
      {created ? <NewKey {...created} onDone={() => setCreated(undefined)} /> : null}
      <ErrorNote error={error ?? list.error} />
      <StatusNote text={status} />
      {list.loading && !list.data ? <Loading what="API keys" /> : null}
      <div class="table-wrap">
        {/* Named by aria-label: the section's heading already shows the name. */}
        <table aria-label="API keys">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col" class="hide-narrow">ID</th>
              <th scope="col" class="hide-narrow">Created</th>
              <th scope="col">Last used</th>
              <th scope="col"><span class="muted">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {rows.map((k) => (
              <tr key={k.id}>
                <td>{k.name}{isOwn(k, api.key) ? <span class="muted"> (signed in with it)</span> : null}</td>
                <td class="mono">{masked(k)}</td>
                <td class="hide-narrow mono">{k.id}</td>
                <td class="hide-narrow" title={when(k.createdAt)}>{relative(k.createdAt)}</td>
                <td title={when(k.lastUsed ?? undefined)}>{k.lastUsed ? relative(k.lastUsed) : 'never'}</td>
                <td><button type="button" class="danger" disabled={busy} aria-label={`Revoke key ${k.name}`} onClick={() => setPending(k)}>Revoke</button></td>
              </tr>
            ))}
            {list.data && rows.length === 0 ? <tr><td colSpan={6} class="muted">No keys besides the admin key.</td></tr> : null}
          </tbody>
        </table>
      </div>
      {pending ? (
        <ConfirmDialog
          open
          title="Revoke key?"
          text={`Key ${pending.name} (${masked(pending)}) will stop working at once.${isOwn(pending, api.key) ? ' This console is signed in with it: its calls are refused from then on (sign in with another key).' : ''}`}
          confirmLabel="Revoke key"
          onConfirm={() => void revoke(pending)}
          onCancel={() => setPending(undefined)}
        />
      ) : null}
    </Section>
  );
}

/** A new key, shown this once: the API keeps only its hash. */
function NewKey({ name, key, onDone }: { name: string; key: string; onDone: () => void }) {
  const [copied, setCopied] = useState<string>();
  const copy = () => navigator.clipboard.writeText(key).then(
    () => setCopied('Copied.'),
    (err: unknown) => setCopied(`Could not copy (${(err as Error).message}): select the key and copy it.`),
  );
  return (
    <div class="new-key">
      <label for="new-api-key">New API key</label>
      <output id="new-api-key" class="mono">{key}</output>
      <p><strong>Shown once:</strong> copy key {name} now; it cannot be shown again.</p>
      <div class="actions">
        <button type="button" onClick={() => void copy()}>Copy key</button>
        <button type="button" onClick={onDone}>Done</button>
        <span class="muted" aria-live="polite">{copied ?? ''}</span>
      </div>
    </div>
  );
}
