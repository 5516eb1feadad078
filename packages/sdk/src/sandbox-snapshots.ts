/**
 * A sandbox's snapshots and forks through the REST API: what `Sandbox.createSnapshot`,
 * `Sandbox.deleteSnapshot` and `Sandbox.fork` do (sandbox.ts), which makes the forks' instances.
 */
import type { ApiClient } from './api-client.ts';
import { timeoutToSeconds } from './config.ts';
import { NotFoundError, SandboxNotFoundError, errorFromBody } from './errors.ts';
import { toSnapshotInfo } from './sandbox-wire.ts';
import type { CreateSnapshotOpts, SandboxApiOpts, SandboxForkOpts, SnapshotInfo } from './types.ts';
import type { WireForkRequest, WireSandbox, WireSnapshotRequest } from './wire.ts';

export async function createSnapshot(api: ApiClient, sandboxId: string, opts: CreateSnapshotOpts): Promise<SnapshotInfo> {
  const body: WireSnapshotRequest = opts.name ? { name: opts.name } : {};
  const wire = await api.call('POST', '/sandboxes/{sandboxID}/snapshots', { params: { sandboxID: sandboxId }, body, notFound: SandboxNotFoundError, signal: opts.signal });
  return toSnapshotInfo(wire);
}

/** True when deleted, false when there was none (DELETE /templates/{id}, as in e2b). */
export async function deleteSnapshot(api: ApiClient, snapshotId: string, opts: SandboxApiOpts): Promise<boolean> {
  try {
    await api.call('DELETE', '/templates/{templateID}', { params: { templateID: snapshotId }, signal: opts.signal });
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

/**
 * One entry per fork: the started sandbox as the API sent it, or the Error that kept it from
 * starting. `requestTimeoutMs` overrides the client's deadline for the call when defined.
 */
export async function forkWire(api: ApiClient, sandboxId: string, opts: SandboxForkOpts, requestTimeoutMs: number | undefined): Promise<Array<WireSandbox | Error>> {
  const body: WireForkRequest = {};
  if (opts.count !== undefined) body.count = opts.count;
  if (opts.timeoutMs !== undefined) body.timeout = timeoutToSeconds(opts.timeoutMs);
  const results = await api.call('POST', '/sandboxes/{sandboxID}/fork', {
    params: { sandboxID: sandboxId },
    body,
    notFound: SandboxNotFoundError,
    signal: opts.signal,
    requestTimeoutMs,
  });
  return (results ?? []).map((r, i) => (r.sandbox?.sandboxID
    ? r.sandbox
    : errorFromBody(r.error, `fork ${i + 1} of sandbox ${sandboxId} did not start`)));
}
