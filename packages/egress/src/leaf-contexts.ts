import { createSecureContext, type SecureContext } from 'node:tls';
import type { EgressCa } from './certificates.ts';
import { Lru } from './lru.ts';

/** A context holds parsed keys and certificates in OpenSSL: fewer of them than of PEM leaves. */
const DEFAULT_CONTEXTS = 2_000;
const RENEW_AFTER_MS = 7 * 24 * 3_600_000;

/**
 * TLS server contexts with the CA's leaf for a name, made on first use and cached: making a
 * context parses the key and certificate, which costs more than minting the leaf.
 */
export class LeafContexts {
  private readonly contexts: Lru<string, { context: SecureContext; madeAt: number }>;

  constructor(private readonly ca: EgressCa, size = DEFAULT_CONTEXTS) {
    this.contexts = new Lru(size);
  }

  /** Throws LeafNameError for a name that is neither a DNS name nor an IPv4 address. */
  forName(name: string): SecureContext {
    const key = name.toLowerCase();
    const cached = this.contexts.get(key);
    // Renewed well before the CA's leaf cache would hand out a leaf near its end.
    if (cached && Date.now() - cached.madeAt < RENEW_AFTER_MS) return cached.context;
    const leaf = this.ca.leafFor(key);
    const context = createSecureContext({ cert: leaf.cert, key: leaf.key });
    this.contexts.set(key, { context, madeAt: Date.now() });
    return context;
  }
}
