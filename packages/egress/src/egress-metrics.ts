/**
 * svc_egress_requests_total{decision} (docs/observability.md, "Prometheus"): every request out of
 * a sandbox, by what its policy decided. `allow`: the policy let it go (its answer may still be
 * the upstream's failure); `deny`: refused before any upstream contact
 * (a rule, the default deny, a fallback's address check, a proxy without policies yet or none for
 * the sandbox, an inject whose Host and TLS name differ or whose placeholders did not resolve);
 * `invalid`: a request that named no upstream the proxy could read (400).
 */
import { collect, counter } from '@svc/common';

export type EgressDecision = 'allow' | 'deny' | 'invalid';

/** Counted here and handed to the counter at each scrape: prom-client's inc hashes its labels on every call, once a request. */
let requests: Record<EgressDecision, number> | undefined;

/** Registers the metric with the process's registry, once (the first egress proxy started). */
export function registerEgressMetrics(): void {
  if (requests) return;
  const counts = { allow: 0, deny: 0, invalid: 0 };
  requests = counts;
  const c = counter('svc_egress_requests_total', 'Requests out of sandboxes through the egress proxy, by the policy\'s decision: allow, deny or invalid.', ['decision']);
  // Every decision's series exists from the start, so a rate over it is 0 rather than absent.
  collect(c, () => (Object.keys(counts) as EgressDecision[]).map((decision) => ({ labels: { decision }, value: counts[decision] })), () => {
    // The hook only reads three numbers: it cannot fail.
  });
}

export function countEgressRequest(decision: EgressDecision): void {
  if (requests) requests[decision]++;
}
