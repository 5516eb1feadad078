import { fillPlaceholders, placeholderRefs, SecretResolverClient, type ResolvedSecrets } from '@svc/contracts/secrets';
import { IdentityMintClient, type MintedWorkloadToken } from '@svc/contracts/identity';
import { SvcError } from '@svc/common';
import { unsafeHeaderCharReason, type SandboxEgressPolicy } from '@svc/contracts/egress';
import type { InjectedHeader } from './headers.ts';

/** Where placeholders are resolved: the master's vault and its workload identity issuer. */
export interface PlaceholderSources {
  secrets: { resolve(teamId: string, names: string[]): Promise<ResolvedSecrets> };
  tokens: { mint(sandboxId: string, name: string): Promise<MintedWorkloadToken> };
}

/** The master that resolves placeholders, as plain data (a worker process builds its clients from it). */
export interface PlaceholderSource {
  masterAddr: string;
  /** egress.admin_token: the master's internal routes take it. */
  token: string;
  /** cluster_token: every master route takes it as well. */
  clusterToken?: string;
}

/** The clients of the master's vault and identity issuer for a PlaceholderSource. */
export function placeholderSourcesOf(source: PlaceholderSource): PlaceholderSources {
  return {
    secrets: new SecretResolverClient(source.masterAddr, source.token, { clusterToken: source.clusterToken }),
    tokens: new IdentityMintClient(source.masterAddr, source.token, { clusterToken: source.clusterToken }),
  };
}

/** Why a request's placeholders could not be filled; status 403 (unknown) or 503 (master). */
export class PlaceholderError extends Error {
  constructor(readonly status: 403 | 503, message: string) {
    super(message);
  }
}

/**
 * `value`, when a header can carry it; else PlaceholderError 403 naming `what` (never the value,
 * which may be a secret). The vault takes any text (a secret may be meant for an environment
 * variable), and a head is written as latin1, where U+010D U+010A are CR LF: a vault value
 * holding them split the request on an upstream connection other sandboxes' requests shared.
 */
function sendableValue(value: string, what: () => string, header: string): string {
  const fault = unsafeHeaderCharReason(value);
  if (fault) throw new PlaceholderError(403, `${what()} of the injected header ${header} ${fault}, so it cannot be sent`);
  return value;
}

/** How long a secret's value is reused: an update or delete reaches requests within this time. */
const SECRET_CACHE_MS = 5_000;
/** A workload token is minted again when this little of its life is left. */
const TOKEN_RENEW_BEFORE_SEC = 300;
const MAX_CACHED = 10_000;

/**
 * Fills `${e2b.secrets.NAME}` and `${e2b.identity.tokens.NAME}` in injected header values, per
 * request (docs/security.md): secrets from the sandbox's own team's vault, tokens minted for the
 * sandbox by the master. The values live only here, in memory, and go only upstream.
 */
export class PlaceholderResolver {
  private readonly secrets = new Map<string, { value: string; until: number }>();
  private readonly tokens = new Map<string, MintedWorkloadToken>();
  private changes = 0;

  constructor(private readonly sources: PlaceholderSources | undefined, private readonly now: () => number = Date.now) {}

  /**
   * The headers with their placeholders filled; headers without any are returned as they are.
   * Every filled value is checked (sendableValue): a vault value or token a header cannot carry
   * fails the request with PlaceholderError 403, never reaching a request head.
   */
  async fill(policy: SandboxEgressPolicy, headers: InjectedHeader[]): Promise<InjectedHeader[]> {
    const refs = { secrets: new Set<string>(), tokens: new Set<string>() };
    for (const h of headers) {
      const r = placeholderRefs(h.value);
      r.secrets.forEach((n) => refs.secrets.add(n));
      r.tokens.forEach((n) => refs.tokens.add(n));
    }
    // Without placeholders the values are the policy's own, checked with it (checkEgressRules),
    // and checked again as the head is built (requestHead: a 502 naming the host).
    if (refs.secrets.size === 0 && refs.tokens.size === 0) return headers;
    if (!this.sources) throw new PlaceholderError(403, 'this egress proxy has no master to resolve secrets and workload tokens from');
    const secretValues = await this.secretValues(policy, [...refs.secrets]);
    const tokenValues = new Map<string, string>();
    for (const name of refs.tokens) tokenValues.set(name, await this.token(policy.sandboxId, name));
    return headers.map((h) => {
      // Each value checked as it is put in, so that the refusal names the secret or token at fault.
      const lookup = {
        secret: (n: string) => sendableValue(secretValues.get(n)!, () => `the secret ${n} of the sandbox's team`, h.name),
        token: (n: string) => sendableValue(tokenValues.get(n)!, () => `the workload token ${n}`, h.name),
      };
      return { name: h.name, value: sendableValue(fillPlaceholders(h.value, lookup), () => 'the value', h.name) };
    });
  }

  /** Grows whenever the values liveValues gives may have changed. */
  get version(): number { return this.changes; }

  /** Every value held now: the audit log redacts them should one ever reach a record. */
  *liveValues(): Iterable<string> {
    for (const s of this.secrets.values()) yield s.value;
    for (const t of this.tokens.values()) yield t.token;
  }

  /** The values held for one sandbox: its team's secrets and its own workload tokens. */
  *valuesOf(teamId: string | undefined, sandboxId: string): Iterable<string> {
    if (teamId) for (const [key, s] of this.secrets) if (key.startsWith(`${teamId}\n`)) yield s.value;
    for (const [key, t] of this.tokens) if (key.startsWith(`${sandboxId}\n`)) yield t.token;
  }

  private async secretValues(policy: SandboxEgressPolicy, names: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (names.length === 0) return out;
    if (!policy.teamId) throw new PlaceholderError(403, `the sandbox's policy names no team, so its secrets (${names.join(', ')}) cannot be resolved`);
    const now = this.now();
    const wanted: string[] = [];
    for (const n of names) {
      const hit = this.secrets.get(`${policy.teamId}\n${n}`);
      if (hit && hit.until > now) out.set(n, hit.value);
      else wanted.push(n);
    }
    if (wanted.length === 0) return out;
    let answer: ResolvedSecrets;
    try {
      answer = await this.sources!.secrets.resolve(policy.teamId, wanted);
    } catch (err) {
      throw new PlaceholderError(503, `the secrets ${wanted.join(', ')} could not be resolved: the master did not answer (${(err as Error).message})`);
    }
    if (answer.missing.length) throw new PlaceholderError(403, `the sandbox's team has no secret ${answer.missing.join(', ')} (deleted since the rule was set?)`);
    if (this.secrets.size + wanted.length > MAX_CACHED) { this.secrets.clear(); this.changes++; }
    for (const n of wanted) {
      const value = answer.values[n]!;
      out.set(n, value);
      this.secrets.set(`${policy.teamId}\n${n}`, { value, until: now + SECRET_CACHE_MS });
      this.changes++;
    }
    return out;
  }

  private async token(sandboxId: string, name: string): Promise<string> {
    const key = `${sandboxId}\n${name}`;
    const hit = this.tokens.get(key);
    if (hit && hit.expiresAt - TOKEN_RENEW_BEFORE_SEC > this.now() / 1000) return hit.token;
    let minted: MintedWorkloadToken;
    try {
      minted = await this.sources!.tokens.mint(sandboxId, name);
    } catch (err) {
      if (err instanceof SvcError && err.status === 404) throw new PlaceholderError(403, `workload token ${name}: ${err.message}`);
      throw new PlaceholderError(503, `workload token ${name} could not be minted: the master did not answer (${(err as Error).message})`);
    }
    if (this.tokens.size >= MAX_CACHED) this.tokens.clear();
    this.tokens.set(key, minted);
    this.changes++;
    return minted.token;
  }
}
