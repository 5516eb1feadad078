import { run } from '../host/exec.ts';

/**
 * The egress proxy's sandbox-facing address, held by the host on its loopback device (a /32, so
 * it routes nothing): steered traffic is DNAT'd to it and delivered locally, so the proxy needs
 * no wildcard listener (docs/egress.md). Loopback rather than a dummy device: kernels built
 * without the dummy driver have it too. Idempotent.
 */
export async function ensureEgressAddress(address: string): Promise<void> {
  await run('ip', ['addr', 'replace', `${address}/32`, 'dev', 'lo']);
}

export async function removeEgressAddress(address: string): Promise<void> {
  await run('ip', ['addr', 'del', `${address}/32`, 'dev', 'lo'], { allowFail: true });
}
