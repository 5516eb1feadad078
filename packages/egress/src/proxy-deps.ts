import type { Logger } from '@svc/common';
import type { EgressScheme } from '@svc/contracts/egress';
import type { AuditSink } from './audit-sink.ts';
import type { PlaceholderResolver } from './placeholders.ts';
import type { PlatformGuard } from './platform-guard.ts';
import type { PolicyStore } from './policy-store.ts';
import type { ProxyVia } from './proxy-via.ts';
import type { Upstreams } from './upstream.ts';

/** What a request's connection tells the proxy: which sandbox, and the client side's TLS. */
export interface ConnectionFacts {
  scheme: EgressScheme;
  sandboxIp: string;
  sni?: string;
  /** The name the client's TLS certificate was made for (the SNI, else the original destination IP). */
  certName?: string;
  tlsVersion: string;
  cipher: string;
}

/** What every exchange of the proxy (request, upgrade, CONNECT) works with. */
export interface ProxyDeps {
  store: PolicyStore;
  placeholders: PlaceholderResolver;
  audit: AuditSink;
  upstreams: Upstreams;
  logger: Logger;
  /** The proxy a sandbox's upstream connections go through (its egressProxy, else egress.upstream_proxy); undefined: direct. */
  viaFor: (sandboxIp: string) => ProxyVia | undefined;
  /** What the proxy never connects to for a sandbox; absent: no such refusal (tests on loopback). */
  platform?: PlatformGuard;
}
