import { useEffect, useRef, useState } from 'preact/hooks';
import type { Api } from '../api.ts';
import { errorText } from '../api.ts';
import { relative, when } from './format.ts';
import { ErrorNote, Loading, Section, StatusNote } from './notes.tsx';
import { usePoll } from './poll.ts';

/** Per-team limits; 0 is no limit (packages/contracts/src/teams.ts, TeamLimits). */
interface Limits { maxSandboxes: number; maxMemoryMB: number; maxVcpus: number; maxConcurrentBuilds: number; maxRequestsPerMinute: number; maxKeptSandboxes: number; maxSnapshots: number; maxVolumes: number }
interface Team { teamId: string; name: string; isDefault: boolean; limits: Limits; createdAt: string }

const QUOTAS: { key: keyof Limits; label: string; short: string }[] = [
  { key: 'maxSandboxes', label: 'Max sandboxes', short: 'Sandboxes' },
  { key: 'maxMemoryMB', label: 'Max memory (MiB)', short: 'Memory (MiB)' },
  { key: 'maxVcpus', label: 'Max vCPUs', short: 'vCPUs' },
  { key: 'maxConcurrentBuilds', label: 'Max concurrent builds', short: 'Builds' },
  { key: 'maxRequestsPerMinute', label: 'Max requests per minute', short: 'Requests/min' },
  { key: 'maxKeptSandboxes', label: 'Max sandboxes kept (running or paused)', short: 'Kept' },
  { key: 'maxSnapshots', label: 'Max snapshots kept', short: 'Snapshots' },
  { key: 'maxVolumes', label: 'Max volumes kept', short: 'Volumes' },
];

const limitText = (n: number) => (n === 0 ? 'no limit' : n.toLocaleString());

/** Every team and its quotas (the admin key's GET /svc/teams); a quota is edited with PATCH /svc/teams/{id}. */
export function AdminTeams({ api }: { api: Api }) {
  const teams = usePoll(async () => {
    const [list, running] = await Promise.all([
      api.get<Team[]>('/svc/teams'),
      api.get<Record<string, number>>('/admin/sandboxes/running-counts'),
    ]);
    return { list: list.sort((a, b) => Number(b.isDefault) - Number(a.isDefault) || a.name.localeCompare(b.name)), running };
  }, 15_000, [api]);
  const [editing, setEditing] = useState<Team>();
  const [status, setStatus] = useState<string>();

  return (
    <Section title="Teams">
      <ErrorNote error={teams.error} />
      <StatusNote text={status} />
      {teams.loading && !teams.data ? <Loading what="teams" /> : null}
      <div class="table-wrap">
        {/* Named by aria-label: the section's heading already shows the name. */}
        <table aria-label="Teams">
          <thead>
            <tr>
              <th scope="col">Team</th>
              <th scope="col" class="hide-narrow">ID</th>
              <th scope="col">Running</th>
              {QUOTAS.map((q) => <th scope="col" key={q.key} class={q.key === 'maxSandboxes' ? undefined : 'hide-narrow'} title={q.label}>{q.short}</th>)}
              <th scope="col" class="hide-narrow">Created</th>
              <th scope="col"><span class="muted">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {(teams.data?.list ?? []).map((t) => (
              <tr key={t.teamId}>
                <td>{t.name}{t.isDefault ? <span class="muted"> (default)</span> : null}</td>
                <td class="hide-narrow mono">{t.teamId}</td>
                <td>{teams.data?.running[t.teamId] ?? 0}</td>
                {QUOTAS.map((q) => <td key={q.key} class={q.key === 'maxSandboxes' ? undefined : 'hide-narrow'}>{limitText(t.limits[q.key])}</td>)}
                <td class="hide-narrow" title={when(t.createdAt)}>{relative(t.createdAt)}</td>
                <td>
                  <button type="button" aria-label={`Edit quotas of ${t.name}`} aria-expanded={editing?.teamId === t.teamId} onClick={() => { setEditing(t); setStatus(undefined); }}>Edit quotas</button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {editing ? (
        <QuotaForm
          key={editing.teamId}
          api={api}
          team={editing}
          onSaved={(t) => { setEditing(undefined); setStatus(`Quotas of ${t.name} saved`); teams.reload(); }}
          onCancel={() => setEditing(undefined)}
        />
      ) : null}
    </Section>
  );
}

/** A quota as typed: a whole number, 0 or more; anything else is named before the call. */
function parseQuota(label: string, raw: string): number | string {
  const s = raw.trim();
  if (s === '') return `${label}: give a number (0 is no limit).`;
  if (s.startsWith('-')) return `${label} cannot be negative (0 is no limit).`;
  if (!/^\d+$/.test(s)) return `${label} must be a whole number, as 0, 10 or 4096 (0 is no limit).`;
  const n = Number(s);
  if (!Number.isSafeInteger(n)) return `${label} is too large.`;
  return n;
}

function QuotaForm({ api, team, onSaved, onCancel }: { api: Api; team: Team; onSaved: (t: Team) => void; onCancel: () => void }) {
  const [values, setValues] = useState<Record<keyof Limits, string>>(() => Object.fromEntries(QUOTAS.map((q) => [q.key, String(team.limits[q.key])])) as Record<keyof Limits, string>);
  const [error, setError] = useState<string>();
  const [invalid, setInvalid] = useState<keyof Limits>();
  const [busy, setBusy] = useState(false);
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => first.current?.focus(), []);

  async function save(e: Event) {
    e.preventDefault();
    const limits: Partial<Limits> = {};
    for (const q of QUOTAS) {
      const n = parseQuota(q.label, values[q.key]);
      if (typeof n === 'string') { setError(n); setInvalid(q.key); return; }
      limits[q.key] = n;
    }
    setError(undefined);
    setInvalid(undefined);
    setBusy(true);
    try {
      onSaved(await api.patch<Team>(`/svc/teams/${encodeURIComponent(team.teamId)}`, { limits }));
    } catch (err) {
      setError(`Could not save the quotas of ${team.name}: ${errorText(err)}`);
    } finally {
      setBusy(false);
    }
  }

  const titleId = `quota-title-${team.teamId}`;
  return (
    <form class="quota-form" aria-labelledby={titleId} onSubmit={save} noValidate>
      <h3 id={titleId}>Quotas of {team.name}</h3>
      <p class="muted">Whole numbers; 0 is no limit.</p>
      <div class="row">
        {QUOTAS.map((q, i) => (
          <div class="field" key={q.key}>
            <label for={`quota-${q.key}`}>{q.label}</label>
            <input
              id={`quota-${q.key}`} ref={i === 0 ? first : undefined} type="number" min={0} step={1} inputMode="numeric"
              value={values[q.key]} aria-invalid={invalid === q.key ? true : undefined}
              onInput={(e) => { const v = e.currentTarget.value; setValues((old) => ({ ...old, [q.key]: v })); setError(undefined); setInvalid(undefined); }}
            />
          </div>
        ))}
      </div>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="submit" disabled={busy}>Save quotas</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}
