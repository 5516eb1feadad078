import { useState } from 'preact/hooks';
import { errorText, type Api } from '../api.ts';
import { ConfirmDialog } from './confirm.tsx';
import { relative } from './format.ts';
import { ErrorNote, StatusNote } from './notes.tsx';
import { MAX_TIMEOUT_SECONDS, type SandboxDetail, type SandboxState } from './sandbox-types.ts';

/** "600" → 600; anything but a whole number of seconds from 1 to the API's most is refused here. */
export function parseTimeout(text: string): number | { error: string } {
  const t = text.trim();
  const n = /^\d{1,10}$/.test(t) ? Number(t) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_TIMEOUT_SECONDS) return { error: `Timeout (seconds) must be a whole number from 1 to ${MAX_TIMEOUT_SECONDS}` };
  return n;
}

/**
 * Pause, Resume, Kill, Set timeout and Snapshot, each enabled only when the state allows it; one
 * at a time. What each did is said in the status line, a refusal in an alert.
 */
export function SandboxActions({ api, sandboxId, detail, state, onChanged, onKilling }: {
  api: Api;
  sandboxId: string;
  detail: SandboxDetail | undefined;
  state: SandboxState | undefined;
  /** After an action: the page reads the sandbox and its events again ('killed': it has ended). */
  onChanged: (what?: 'killed') => void;
  /** A kill starts (true) or failed (false): the page stops asking for what the kill takes away. */
  onKilling: (killing: boolean) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState<string>();
  const [error, setError] = useState<string>();
  const [confirmKill, setConfirmKill] = useState(false);
  const [timeoutOpen, setTimeoutOpen] = useState(false);
  const [timeoutText, setTimeoutText] = useState('');
  const path = `/sandboxes/${encodeURIComponent(sandboxId)}`;
  const running = state === 'running';
  const paused = state === 'paused';

  const run = async (what: string, pending: string, call: () => Promise<string>, changed?: 'killed') => {
    setBusy(true);
    setError(undefined);
    setStatus(pending);
    try {
      setStatus(await call());
      onChanged(changed);
    } catch (err) {
      setStatus(undefined);
      setError(`${what}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  };

  const pause = () => run('Pause', 'Pausing…', async () => { await api.post(`${path}/pause`, {}); return 'Paused.'; });
  // Connect is E2B's resume (POST /resume is deprecated); the sandbox keeps its own idle timeout.
  const resume = () => run('Resume', 'Resuming…', async () => {
    await api.post(`${path}/connect`, detail ? { timeout: detail.timeout } : {});
    return 'Resumed.';
  });
  const kill = () => {
    setConfirmKill(false);
    onKilling(true);
    void run('Kill', 'Killing…', async () => {
      // One frame first: the page closes an open terminal on onKilling, and its stream should be
      // gone before the sandbox is (else the browser reports the cut-off response as an error).
      await new Promise((r) => requestAnimationFrame(() => r(undefined)));
      try {
        await api.delete(path);
      } catch (err) {
        onKilling(false);
        throw err;
      }
      return 'Killed.';
    }, 'killed');
  };
  const snapshot = () => run('Snapshot', 'Taking a snapshot…', async () => {
    const s = await api.post<{ snapshotID: string }>(`${path}/snapshots`, {});
    return `Snapshot ${s.snapshotID} created`;
  });
  const saveTimeout = (e: Event) => {
    e.preventDefault();
    const t = parseTimeout(timeoutText);
    if (typeof t !== 'number') { setStatus(undefined); setError(t.error); return; }
    void run('Set timeout', 'Setting the timeout…', async () => {
      await api.post(`${path}/timeout`, { timeout: t });
      setTimeoutOpen(false);
      return `Timeout set: ends ${relative(Date.now() + t * 1000)}.`;
    });
  };

  return (
    <div class="sandbox-actions">
      <div class="actions" role="group" aria-label="Sandbox actions">
        <button type="button" disabled={busy || !running} onClick={() => void pause()}>Pause</button>
        <button type="button" disabled={busy || !paused} onClick={() => void resume()}>Resume</button>
        <button type="button" disabled={busy || !running} aria-expanded={timeoutOpen}
          onClick={() => { setTimeoutOpen(!timeoutOpen); setTimeoutText(timeoutText || String(detail && detail.timeout > 0 ? detail.timeout : 300)); }}>Set timeout</button>
        <button type="button" disabled={busy || !running} onClick={() => void snapshot()}>Snapshot</button>
        <button type="button" class="danger" disabled={busy || !(running || paused)} onClick={() => setConfirmKill(true)}>Kill</button>
      </div>
      {timeoutOpen && running ? (
        <form class="row sandbox-timeout" onSubmit={saveTimeout} noValidate>
          <div class="field">
            <label for="sbx-timeout">Timeout (seconds)</label>
            <input id="sbx-timeout" type="number" inputMode="numeric" min={1} max={MAX_TIMEOUT_SECONDS} step={1} required
              value={timeoutText} onInput={(e) => setTimeoutText(e.currentTarget.value)} />
          </div>
          <button type="submit" disabled={busy}>Save timeout</button>
          <span class="muted">From now; the sandbox ends after this long unless something keeps it alive.</span>
        </form>
      ) : null}
      <StatusNote text={status} />
      <ErrorNote error={error} />
      <ConfirmDialog open={confirmKill} title="Kill this sandbox?" confirmLabel="Kill sandbox"
        text={`Sandbox ${sandboxId} stops at once and its files are gone (a snapshot keeps them).`}
        onConfirm={kill} onCancel={() => setConfirmKill(false)} />
    </div>
  );
}
