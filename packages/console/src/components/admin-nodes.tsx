import { useEffect, useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { errorText } from '../api.ts';
import { ConfirmDialog } from './confirm.tsx';
import { bytes, relative, when } from './format.ts';
import { ErrorNote, Loading, Section, StatusNote } from './notes.tsx';
import { usePoll } from './poll.ts';

/** packages/contracts/src/master.ts, NodeRecord (the fields shown). */
interface NodeRecord {
  nodeId: string;
  address: string;
  runtime: string;
  runtimes: string[];
  status: 'ready' | 'draining' | 'unreachable';
  capacity: { cpuCount: number; memoryMB: number };
  usage: { running: number; paused: number; usedMemoryMB: number; memory?: { availableMB: number } };
  labels: Record<string, string>;
  version: string;
  lastHeartbeatAt: string;
}

/** A drain's course (DrainStatus). */
interface Drain {
  node: NodeRecord;
  state: 'running' | 'done' | 'stopped' | 'interrupted';
  total: number;
  remaining: number;
  moved: string[];
  stored: string[];
  failed: { sandboxId: string; message: string }[];
  startedAt: string;
  finishedAt?: string;
}

const mib = (n: number) => bytes(n * 1024 * 1024);

/** The cluster's nodes (admin key): labels, memory, sandboxes; drain (asks first) and undrain. */
export function AdminNodes({ api }: { api: Api }) {
  const nodes = usePoll(() => api.get<NodeRecord[]>('/nodes'), 5000, [api]);
  const [pending, setPending] = useState<NodeRecord>();
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState<string>();
  const [drain, setDrain] = useState<Drain>();

  async function act(n: NodeRecord, what: string, call: () => Promise<void>) {
    setBusy(n.nodeId);
    setError(undefined);
    try {
      await call();
      nodes.reload();
    } catch (err) {
      setError(`Could not ${what} node ${n.nodeId}: ${errorText(err)}`);
    } finally {
      setBusy(undefined);
    }
  }
  const drainPath = (n: NodeRecord) => `/nodes/${encodeURIComponent(n.nodeId)}/drain`;
  const startDrain = (n: NodeRecord) => {
    setPending(undefined);
    return act(n, 'drain', async () => {
      const d = await api.post<Drain>(drainPath(n));
      setDrain(d);
      setStatus(`Node ${n.nodeId} draining: ${d.state}`);
    });
  };
  const undrain = (n: NodeRecord) => act(n, 'undrain', async () => {
    await api.delete(drainPath(n));
    setStatus(`Node ${n.nodeId} undrained: it takes new sandboxes again`);
  });

  const rows = nodes.data ?? [];
  return (
    <Section title="Nodes">
      <ErrorNote error={error ?? nodes.error} />
      <StatusNote text={status} />
      {nodes.loading && !nodes.data ? <Loading what="nodes" /> : null}
      <div class="table-wrap">
        {/* Named by aria-label: the section's heading already shows the name. */}
        <table aria-label="Nodes">
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Status</th>
              <th scope="col" class="hide-narrow">Labels</th>
              <th scope="col">Memory</th>
              <th scope="col" class="hide-narrow">Sandboxes</th>
              <th scope="col" class="hide-narrow">CPU</th>
              <th scope="col" class="hide-narrow">Runtimes</th>
              <th scope="col" class="hide-narrow">Heartbeat</th>
              <th scope="col"><span class="muted">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {rows.map((n) => (
              <tr key={n.nodeId}>
                <td>
                  <span class="mono">{n.nodeId}</span>
                  <div class="muted hide-narrow">{n.address} · v{n.version}</div>
                  {/* A phone has no room for the Labels and Sandboxes columns: they go under the id and the memory. */}
                  <div class="show-narrow"><Labels labels={n.labels} /></div>
                </td>
                <td><span class={`badge ${n.status}`}>{n.status}</span></td>
                <td class="hide-narrow"><Labels labels={n.labels} /></td>
                <td>
                  {mib(n.usage.usedMemoryMB)} / {mib(n.capacity.memoryMB)} used
                  {n.usage.memory ? <div class="muted">{mib(n.usage.memory.availableMB)} free</div> : null}
                  <div class="show-narrow">{n.usage.running} running, {n.usage.paused} paused</div>
                </td>
                <td class="hide-narrow">{n.usage.running} running<div>{n.usage.paused} paused</div></td>
                <td class="hide-narrow">{n.capacity.cpuCount}</td>
                <td class="hide-narrow">{n.runtimes.join(', ') || n.runtime}</td>
                <td class="hide-narrow" title={when(n.lastHeartbeatAt)}>{relative(n.lastHeartbeatAt)}</td>
                <td>
                  {n.status === 'draining'
                    ? <button type="button" disabled={busy === n.nodeId} aria-label={`Undrain node ${n.nodeId}`} onClick={() => void undrain(n)}>Undrain</button>
                    : <button type="button" class="danger" disabled={busy === n.nodeId} aria-label={`Drain node ${n.nodeId}`} onClick={() => setPending(n)}>Drain</button>}
                </td>
              </tr>
            ))}
            {nodes.data && rows.length === 0 ? <tr><td colSpan={9} class="muted">No nodes have registered.</td></tr> : null}
          </tbody>
        </table>
      </div>
      {drain ? <DrainProgress api={api} first={drain} /> : null}
      {pending ? (
        <ConfirmDialog
          open
          title="Drain node?"
          text={`Node ${pending.nodeId} will take no new sandboxes; its ${pending.usage.running} running sandboxes move to other nodes and its ${pending.usage.paused} paused ones are stored to resume elsewhere.${rows.length === 1 ? ' It is the only node: no new sandbox can start until it is undrained.' : ''}`}
          confirmLabel="Drain node"
          onConfirm={() => void startDrain(pending)}
          onCancel={() => setPending(undefined)}
        />
      ) : null}
    </Section>
  );
}

function Labels({ labels }: { labels: Record<string, string> }) {
  const entries = Object.entries(labels);
  return entries.length ? <ul class="labels">{entries.map(([k, v]) => <li key={k} class="mono">{k}={v}</li>)}</ul> : <span class="muted">no labels</span>;
}

/** The drain started here, followed every 2 s until it ends (GET /nodes/{id}/drain). */
function DrainProgress({ api, first }: { api: Api; first: Drain }) {
  const [d, setD] = useState(first);
  const [error, setError] = useState<string>();
  /** Bumped by a failed call, so the next try is made 2 s later. */
  const [tries, setTries] = useState(0);
  useEffect(() => setD(first), [first]);
  useEffect(() => {
    if (d.state !== 'running') return undefined;
    const timer = setTimeout(() => {
      api.get<Drain>(`/nodes/${encodeURIComponent(d.node.nodeId)}/drain`).then((next) => { setD(next); setError(undefined); }, (err: unknown) => { setError(errorText(err)); setTries((n) => n + 1); });
    }, 2000);
    return () => clearTimeout(timer);
  }, [api, d, tries]);
  return (
    <div class="drain" aria-label={`Drain of ${d.node.nodeId}`} role="group">
      <h3>Drain of {d.node.nodeId}</h3>
      <ErrorNote error={error} />
      <dl class="facts">
        <dt>Drain</dt><dd>{d.state}</dd>
        <dt>Sandboxes</dt><dd>{d.total - d.remaining} of {d.total} done</dd>
        <dt>Moved</dt><dd>{d.moved.length}</dd>
        <dt>Stored</dt><dd>{d.stored.length}</dd>
        {d.failed.length ? <><dt>Failed</dt><dd class="error">{d.failed.map((f) => `${f.sandboxId}: ${f.message}`).join('; ')}</dd></> : null}
        <dt>Started</dt><dd>{when(d.startedAt)}</dd>
        {d.finishedAt ? <><dt>Finished</dt><dd>{when(d.finishedAt)}</dd></> : null}
      </dl>
    </div>
  );
}
