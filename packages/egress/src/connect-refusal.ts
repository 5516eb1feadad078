import type { EgressRule } from '@svc/contracts/egress';
import type { TunnelDenial } from './decide.ts';

/**
 * Why a deny rule refuses a CONNECT, for its 403 and its connect_refused event (docs/egress.md
 * "WebSocket and CONNECT"): the host and port, the rule, and why it holds for the whole tunnel.
 * A rule written for `DELETE` or `/admin*` refuses every tunnel to its host, which "denied by
 * rule no-admin" alone left the sandbox's author to puzzle out.
 */
export function connectRefusal(rule: EgressRule, how: TunnelDenial, host: string, port: number): string {
  const m = rule.match;
  const refused = `CONNECT ${host}:${port} refused: deny rule ${rule.name}`;
  // What the rule narrows by that the proxy cannot see inside a tunnel it does not read.
  const unseen = [
    ...(how === 'host' && m.sni !== undefined ? [`sni ${m.sni}`] : []),
    ...(m.path !== undefined ? [`path ${m.path}`] : []),
    // CONNECT itself is what matched, not something inside the tunnel.
    ...(m.method !== undefined && m.method.some((x) => x !== 'CONNECT') ? [`method ${m.method.filter((x) => x !== 'CONNECT').join(', ')}`] : []),
  ];
  const carries = `a tunnel carries any ${how === 'host' && m.sni !== undefined ? 'SNI, path and method' : 'path and method'}`;
  const narrowed = unseen.length ? `, and ${carries} (the rule's ${unseen.join('; ')} cannot be checked inside it)` : '';
  switch (how) {
    case 'host':
      return `${refused} names this host${narrowed}`;
    case 'sni':
      return `${refused} names this host as its SNI (the proxy takes a CONNECT's host for the tunnel's SNI, which it cannot see)${narrowed}`;
    case 'as_sent':
      return `${refused} names no host or SNI, and holds for the CONNECT itself (method CONNECT, empty path)`;
  }
}
