import { useState } from 'preact/hooks';
import type { PageProps } from '../page-props.ts';
import { errorText } from '../api.ts';
import { ConfirmDialog } from '../components/confirm.tsx';
import { ErrorNote, Loading, StatusNote } from '../components/notes.tsx';
import { usePoll } from '../components/poll.ts';

/** E2B's SnapshotInfo: `snapshotID` is its name when it has one, else its id (Sandbox.create takes either). */
interface Snapshot { snapshotID: string; names: string[] }

const PER_PAGE = [25, 100, 1000];

/**
 * The team's snapshots, newest first, a page at a time (X-Next-Token). Deleting one is E2B's
 * DELETE /templates/{snapshotID}, as the SDK's Sandbox.deleteSnapshot does.
 */
export function SnapshotsPage({ id }: PageProps) {
  const [limit, setLimit] = useState(25);
  const [sandbox, setSandbox] = useState('');
  /** tokens[i] loads page i (page 0 has none). */
  const [tokens, setTokens] = useState<(string | undefined)[]>([undefined]);
  const page = tokens.length - 1;
  const list = usePoll(() => id.api.getPage<Snapshot>('/snapshots', { limit, nextToken: tokens[page], sandboxID: sandbox.trim() || undefined }), 10_000, [id.api, limit, sandbox, page]);
  const [pending, setPending] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState<string>();
  const [error, setError] = useState<string>();
  const restart = () => setTokens([undefined]);

  async function remove(snapshotId: string) {
    setPending(undefined);
    setBusy(true);
    setError(undefined);
    try {
      await id.api.delete(`/templates/${encodeURIComponent(snapshotId)}`);
      setStatus(`Snapshot ${snapshotId} deleted`);
      list.reload();
    } catch (err) {
      setError(`Could not delete snapshot ${snapshotId}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  const rows = list.data?.items ?? [];
  return (
    <>
      <h1>Snapshots</h1>
      <form class="row card" role="search" aria-label="Filter snapshots" onSubmit={(e) => e.preventDefault()}>
        <div class="field">
          <label for="snap-sandbox">Sandbox</label>
          <input id="snap-sandbox" value={sandbox} placeholder="taken of this sandbox id" onChange={(e) => { setSandbox(e.currentTarget.value); restart(); }} />
        </div>
        <div class="field">
          <label for="snap-per-page">Per page</label>
          <select id="snap-per-page" value={limit} onChange={(e) => { setLimit(Number(e.currentTarget.value)); restart(); }}>
            {PER_PAGE.map((n) => <option key={n} value={n}>{n}</option>)}
          </select>
        </div>
      </form>
      <ErrorNote error={error ?? list.error} />
      <StatusNote text={status} />
      {list.loading && !list.data ? <Loading what="snapshots" /> : null}
      <div class="card table-wrap">
        <table>
          <caption>Snapshots</caption>
          <thead><tr><th scope="col">Snapshot</th><th scope="col">Names</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>
            {rows.map((s) => (
              <tr key={s.snapshotID}>
                <td class="mono">{s.snapshotID}</td>
                <td>{s.names.length ? s.names.join(', ') : <span class="muted">unnamed</span>}</td>
                <td><button type="button" class="danger" disabled={busy} aria-label={`Delete snapshot ${s.snapshotID}`} onClick={() => setPending(s.snapshotID)}>Delete</button></td>
              </tr>
            ))}
            {list.data && rows.length === 0 ? <tr><td colSpan={3} class="muted">No snapshots{page ? ' on this page' : ''}. A sandbox's page makes one (Snapshot).</td></tr> : null}
          </tbody>
        </table>
      </div>
      <div class="actions pager">
        <button type="button" disabled={page === 0} onClick={() => setTokens(tokens.slice(0, -1))}>Previous page</button>
        <span class="muted">Page {page + 1}</span>
        <button type="button" disabled={!list.data?.nextToken} onClick={() => setTokens([...tokens, list.data?.nextToken])}>Next page</button>
      </div>
      {pending ? (
        <ConfirmDialog
          open
          title="Delete snapshot?"
          text={`Snapshot ${pending} will be deleted: no new sandbox can start from it. Sandboxes already started from it keep running.`}
          confirmLabel="Delete snapshot"
          onConfirm={() => void remove(pending)}
          onCancel={() => setPending(undefined)}
        />
      ) : null}
    </>
  );
}
