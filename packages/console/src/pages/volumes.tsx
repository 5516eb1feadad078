import { useState } from 'preact/hooks';
import type { PageProps } from '../page-props.ts';
import { errorText } from '../api.ts';
import { ConfirmDialog } from '../components/confirm.tsx';
import { ErrorNote, Loading, StatusNote } from '../components/notes.tsx';
import { usePoll } from '../components/poll.ts';

interface Volume { volumeID: string; name: string }

/** A volume's name as the API takes it (packages/contracts/src/volumes.ts, checkVolumeName). */
const NAME = /^[a-zA-Z0-9_-]+$/;
const NAME_MAX = 128;

/** Why a name would be refused, or undefined when the API will take it. */
function nameProblem(name: string, taken: Volume[] | undefined): string | undefined {
  if (!name) return 'Give the volume a name.';
  if (name.length > NAME_MAX) return `A volume name has at most ${NAME_MAX} characters (this one has ${name.length}).`;
  if (!NAME.test(name)) return 'A volume name may hold letters, digits, "-" and "_" only.';
  if (taken?.some((v) => v.name === name)) return `The team has a volume named ${name} already.`;
  return undefined;
}

/** The team's volumes (docs/volumes.md): create and delete; a volume still mounted is the API's 409. */
export function VolumesPage({ id }: PageProps) {
  const list = usePoll(() => id.api.get<Volume[]>('/volumes'), 10_000, [id.api]);
  const [name, setName] = useState('');
  const [formError, setFormError] = useState<string>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [pending, setPending] = useState<Volume>();

  async function create(e: Event) {
    e.preventDefault();
    const wanted = name.trim();
    const problem = nameProblem(wanted, list.data);
    setFormError(problem);
    if (problem) return;
    setBusy(true);
    setError(undefined);
    try {
      const made = await id.api.post<Volume>('/volumes', { name: wanted });
      setStatus(`Volume ${made.name} created`);
      setName('');
      list.reload();
    } catch (err) {
      setFormError(`Could not create volume ${wanted}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  async function remove(v: Volume) {
    setPending(undefined);
    setBusy(true);
    setError(undefined);
    try {
      await id.api.delete(`/volumes/${encodeURIComponent(v.volumeID)}`);
      setStatus(`Volume ${v.name} deleted`);
      list.reload();
    } catch (err) {
      setError(`Could not delete volume ${v.name}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  const rows = [...(list.data ?? [])].sort((a, b) => a.name.localeCompare(b.name));
  return (
    <>
      <h1>Volumes</h1>
      <form class="card" aria-label="Create a volume" onSubmit={create} noValidate>
        <div class="row">
          <div class="field">
            <label for="volume-name">Volume name</label>
            <input
              id="volume-name" value={name} maxLength={NAME_MAX} autoComplete="off" spellcheck={false}
              aria-invalid={formError ? true : undefined} aria-describedby="volume-name-help"
              onInput={(e) => { setName(e.currentTarget.value); setFormError(undefined); }}
            />
          </div>
          <button type="submit" disabled={busy}>Create volume</button>
        </div>
        <p id="volume-name-help" class="muted">Letters, digits, "-" and "_"; at most {NAME_MAX} characters. Sandboxes mount it by name.</p>
        <ErrorNote error={formError} />
      </form>
      <ErrorNote error={error ?? list.error} />
      <StatusNote text={status} />
      {list.loading && !list.data ? <Loading what="volumes" /> : null}
      <div class="card table-wrap">
        <table>
          <caption>Volumes</caption>
          <thead><tr><th scope="col">Name</th><th scope="col" class="hide-narrow">ID</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>
            {rows.map((v) => (
              <tr key={v.volumeID}>
                <td>{v.name}</td>
                <td class="mono hide-narrow">{v.volumeID}</td>
                <td><button type="button" class="danger" disabled={busy} aria-label={`Delete volume ${v.name}`} onClick={() => setPending(v)}>Delete</button></td>
              </tr>
            ))}
            {list.data && rows.length === 0 ? <tr><td colSpan={3} class="muted">No volumes yet.</td></tr> : null}
          </tbody>
        </table>
      </div>
      {pending ? (
        <ConfirmDialog
          open
          title="Delete volume?"
          text={`Volume ${pending.name} and every file in it will be deleted. A volume mounted by a sandbox cannot be deleted.`}
          confirmLabel="Delete volume"
          onConfirm={() => void remove(pending)}
          onCancel={() => setPending(undefined)}
        />
      ) : null}
    </>
  );
}
