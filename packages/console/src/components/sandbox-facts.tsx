import type { ComponentChildren } from 'preact';
import { bytes, relative, when } from './format.ts';
import { Section } from './notes.tsx';
import type { SandboxDetail, SandboxEvent, SandboxState } from './sandbox-types.ts';

/** What is known of an ended sandbox: its lifecycle events (GET /sandboxes/{id} is a 404 once it is killed). */
export interface EndedFacts {
  templateID?: string;
  startedAt?: string;
  endedAt?: string;
  reason?: string;
  cpuCount?: number;
  memoryMB?: number;
  metadata?: Record<string, string>;
}

/** The facts of an ended sandbox from its events (newest first, as the API lists them). */
export function endedFacts(events: SandboxEvent[]): EndedFacts {
  const killed = events.find((e) => e.type === 'sandbox.lifecycle.killed');
  const created = events.findLast((e) => e.type === 'sandbox.lifecycle.created');
  const any = killed ?? events[0];
  return {
    templateID: any?.sandboxTemplateId,
    startedAt: created?.timestamp ?? killed?.eventData?.execution?.started_at,
    endedAt: killed?.timestamp,
    reason: killed?.eventData?.reason,
    cpuCount: killed?.eventData?.execution?.vcpu_count,
    memoryMB: killed?.eventData?.execution?.memory_mb,
    metadata: any?.eventData?.sandbox_metadata,
  };
}

const mib = (n: number | undefined) => (n === undefined ? '–' : bytes(n * 1024 * 1024));
const at = (iso: string | undefined) => (iso ? `${when(iso)} (${relative(iso)})` : '–');

function Fact({ name, children }: { name: string; children: ComponentChildren }) {
  return <><dt>{name}</dt><dd>{children}</dd></>;
}

function StateBadge({ state }: { state: SandboxState }) {
  return <span class={`badge ${state}`}>{state}</span>;
}

/** The sandbox's facts: the detail of a live one, or what its events say of an ended one. */
export function SandboxFacts({ detail, ended }: { detail: SandboxDetail | undefined; ended: EndedFacts | undefined }) {
  if (detail) {
    const d = detail;
    const ends = d.endAt ? at(d.endAt) : d.state === 'running' ? 'never (no timeout)' : '–';
    return (
      <dl class="facts">
        <Fact name="State"><StateBadge state={d.state} /></Fact>
        <Fact name="Template">{d.alias ? <>{d.alias} <span class="muted mono">{d.templateID}</span></> : <span class="mono">{d.templateID}</span>}</Fact>
        <Fact name="Runtime">{d.runtime ?? '–'}</Fact>
        <Fact name="Node"><span class="mono">{d.clientID}</span></Fact>
        <Fact name="Started">{at(d.startedAt)}</Fact>
        <Fact name="Ends">{ends}</Fact>
        <Fact name="Timeout">{d.timeout < 0 ? 'never' : `${d.timeout} s`}, then {d.lifecycle.onTimeout}{d.lifecycle.autoResume ? ' (resumes on traffic)' : ''}</Fact>
        <Fact name="CPUs">{d.cpuCount}</Fact>
        <Fact name="Memory">{mib(d.memoryMB)}</Fact>
        <Fact name="Disk">{mib(d.diskSizeMB)}</Fact>
        <Fact name="envd version">{d.envdVersion}</Fact>
        <Fact name="Pause kind">{d.pauseKind ?? '–'}</Fact>
      </dl>
    );
  }
  const e = ended ?? {};
  return (
    <dl class="facts">
      <Fact name="State"><StateBadge state="ended" /></Fact>
      <Fact name="Template"><span class="mono">{e.templateID ?? '–'}</span></Fact>
      <Fact name="Started">{at(e.startedAt)}</Fact>
      <Fact name="Ended">{at(e.endedAt)}{e.reason ? ` · ${e.reason}` : ''}</Fact>
      <Fact name="CPUs">{e.cpuCount ?? '–'}</Fact>
      <Fact name="Memory">{mib(e.memoryMB)}</Fact>
    </dl>
  );
}

export function MetadataSection({ metadata }: { metadata: Record<string, string> | undefined }) {
  const entries = Object.entries(metadata ?? {});
  return (
    <Section title="Metadata">
      {entries.length ? (
        <dl class="facts">{entries.map(([k, v]) => <Fact key={k} name={k}><span class="mono">{v}</span></Fact>)}</dl>
      ) : <p class="muted">No metadata.</p>}
    </Section>
  );
}

const list = (xs: string[] | undefined) => (xs?.length ? <span class="mono">{xs.join(', ')}</span> : <span class="muted">none</span>);

export function NetworkSection({ detail }: { detail: SandboxDetail | undefined }) {
  const n = detail?.network;
  return (
    <Section title="Network">
      {detail && n ? (
        <>
          <dl class="facts">
            <Fact name="Internet access">{detail.allowInternetAccess === null ? 'default' : detail.allowInternetAccess ? 'allowed' : 'denied'}</Fact>
            <Fact name="Allow out">{list(n.allowOut)}</Fact>
            <Fact name="Deny out">{list(n.denyOut)}</Fact>
            <Fact name="Public traffic">{n.allowPublicTraffic ? 'allowed' : 'needs the traffic access token'}</Fact>
            {n.maskRequestHost ? <Fact name="Mask request host"><span class="mono">{n.maskRequestHost}</span></Fact> : null}
            <Fact name="Rules">
              {n.rules === undefined ? <span class="muted">none</span> : <pre class="log" tabIndex={0} aria-label="Egress rules">{JSON.stringify(n.rules, null, 2)}</pre>}
            </Fact>
          </dl>
        </>
      ) : <p class="muted">Not known once the sandbox has ended.</p>}
    </Section>
  );
}

export function VolumesSection({ detail }: { detail: SandboxDetail | undefined }) {
  const mounts = detail?.volumeMounts ?? [];
  return (
    <Section title="Volumes">
      {!detail ? <p class="muted">Not known once the sandbox has ended.</p> : mounts.length ? (
        <div class="table-wrap">
          <table aria-label="Volumes">
            <thead><tr><th scope="col">Name</th><th scope="col">Path</th><th scope="col">Mode</th></tr></thead>
            <tbody>
              {mounts.map((m) => <tr key={m.name}><td>{m.name}</td><td class="mono">{m.path}</td><td>{m.readOnly ? 'read-only' : 'read-write'}</td></tr>)}
            </tbody>
          </table>
        </div>
      ) : <p class="muted">No volumes mounted.</p>}
    </Section>
  );
}
