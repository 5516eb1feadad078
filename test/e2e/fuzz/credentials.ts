/**
 * The credentials of a fuzz case: those that work (and for envd the addressing through the
 * proxy), and wrong ones, which every route must refuse.
 */
import { CLUSTER_TOKEN_HEADER } from '@svc/contracts/cluster-token';
import { ADMIN_TOKEN_HEADER } from '@svc/contracts/proxy-admin';
import { CALLBACK_TOKEN_HEADER } from '@svc/contracts/template-center';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import type { Rng } from './random.ts';
import type { Known } from './routes.ts';
import type { AuthKind, RouteSpec } from './spec.ts';
import { KB } from './values.ts';

/** envd's port inside every sandbox. */
export const ENVD_PORT = 49983;

const AUTH_HEADER: Record<Exclude<AuthKind, 'none'>, string> = {
  apiKey: 'x-api-key',
  callbackToken: CALLBACK_TOKEN_HEADER,
  adminToken: ADMIN_TOKEN_HEADER,
  nodeToken: NODE_TOKEN_HEADER,
  clusterToken: CLUSTER_TOKEN_HEADER,
};

export function contentTypeOf(spec: RouteSpec): string {
  return spec.connect === 'server-stream' || spec.connect === 'client-stream' ? 'application/connect+json' : 'application/json';
}

function secretOf(k: Known, auth: Exclude<AuthKind, 'none'>): string {
  switch (auth) {
    case 'apiKey': return k.apiKey;
    case 'callbackToken': return k.callbackToken;
    case 'nodeToken': return k.nodeToken;
    case 'clusterToken': return k.clusterToken;
    case 'adminToken': return k.adminToken;
  }
}

/**
 * cluster_token, which every route of the masters and the lifecycle replicas takes besides its
 * own credential (the template center's callback its callback token too): sent right with every
 * case of theirs but those that test the cluster token itself.
 */
function ambient(k: Known, spec: RouteSpec): Record<string, string> {
  return (spec.component === 'master' || spec.component === 'lifecycle') && spec.auth !== 'clusterToken' ? { [CLUSTER_TOKEN_HEADER]: k.clusterToken } : {};
}

/** Credentials that work, and for envd the addressing through the proxy. */
export function goodCredentials(k: Known, spec: RouteSpec, rng: Rng): Record<string, string> {
  if (spec.component === 'envd') {
    const target = rng.float();
    const id = target < 0.82 ? k.running : target < 0.9 ? k.private : target < 0.95 ? k.killed : `fuzz${rng.alnum(16)}`;
    const h: Record<string, string> = rng.chance(0.7)
      ? { host: `${ENVD_PORT}-${id}.${k.domain}` }
      : { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(ENVD_PORT) };
    if (id === k.running) h['x-access-token'] = k.envdToken;
    if (id === k.private) h['e2b-traffic-access-token'] = k.trafficToken;
    return h;
  }
  if (spec.auth === 'none') return ambient(k, spec);
  const secret = secretOf(k, spec.auth);
  if (spec.auth === 'apiKey' && rng.chance(0.15)) return { authorization: `Bearer ${secret}` };
  return { ...ambient(k, spec), [AUTH_HEADER[spec.auth]]: secret };
}

/** Three kinds of wrong credentials for the route, picked at random. */
export function badCredentials(k: Known, spec: RouteSpec, rng: Rng): Array<{ headers: Record<string, string>; note: string }> {
  if (spec.component === 'envd') {
    const h = { host: `${ENVD_PORT}-${k.running}.${k.domain}` };
    return [
      { headers: { ...h, 'x-access-token': k.envdToken.slice(0, -1) + 'x', 'content-type': contentTypeOf(spec) }, note: 'wrong envd access token' },
      { headers: { ...h, 'content-type': contentTypeOf(spec), authorization: `Basic ${Buffer.from(`${rng.pick(['nobody-here', '', 'user:x', '../root'])}:`).toString('base64')}` }, note: 'no envd token, odd basic-auth user' },
    ];
  }
  if (spec.auth === 'none') return [];
  const name = AUTH_HEADER[spec.auth];
  const secret = secretOf(k, spec.auth);
  const ct: Record<string, string> = { ...ambient(k, spec), ...(spec.body !== undefined ? { 'content-type': contentTypeOf(spec) } : {}) };
  const variants: [string, Record<string, string>][] = [
    ['no credentials', {}],
    ['wrong secret, same length', { [name]: secret.slice(0, -1) + (secret.endsWith('x') ? 'y' : 'x') }],
    ['one-character secret', { [name]: 'x' }],
    ['10 KB secret', { [name]: 'k'.repeat(10 * KB) }],
    ['secret with latin1 bytes', { [name]: `\u00ff\u00fe${secret}` }],
    ['empty secret', { [name]: '' }],
    ['secret with trailing space', { [name]: `${secret} ` }],
    ...(spec.auth === 'apiKey' ? [
      ['empty bearer', { authorization: 'Bearer ' }],
      ['basic auth', { authorization: `Basic ${Buffer.from(`u:${secret}`).toString('base64')}` }],
      ['wrong X-API-Key, right bearer', { 'x-api-key': 'wrong', authorization: `Bearer ${secret}` }],
    ] as [string, Record<string, string>][] : []),
  ];
  const picked = new Set<number>();
  while (picked.size < Math.min(3, variants.length)) picked.add(rng.int(0, variants.length - 1));
  return [...picked].map((i) => ({ headers: { ...ct, ...variants[i][1] }, note: `auth: ${variants[i][0]}` }));
}
