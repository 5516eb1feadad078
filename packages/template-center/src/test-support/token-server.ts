import { spawnSync } from 'node:child_process';
import { createPrivateKey, randomUUID, sign, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';

export interface TokenServer {
  realm: string;
  service: string;
  issuer: string;
  /** PEM bundle the registry verifies tokens with. */
  rootCertBundle: string;
  issued: number;
  close(): Promise<void>;
}

/**
 * A registry token service (the `auth: token` flow of docker distribution): answers
 * GET /token?service=&scope=repository:<name>:<actions> with a JWT signed by a key whose
 * certificate the registry trusts. Valid Basic credentials get what they ask for; anonymous
 * callers get a token without access; wrong credentials get 401.
 */
export async function startTokenServer(dir: string, users: Record<string, string>): Promise<TokenServer> {
  const keyPath = join(dir, 'token.key');
  const certPath = join(dir, 'token.crt');
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '2', '-subj', '/CN=svc-test-token'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl: ${r.stderr}`);
  const key = createPrivateKey(readFileSync(keyPath));
  const certDer = new X509Certificate(readFileSync(certPath)).raw.toString('base64');
  const service = 'svc-test-registry';
  const issuer = 'svc-test-issuer';
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

  const state = { issued: 0 };
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/token') { res.writeHead(404).end(); return; }
    const auth = req.headers.authorization;
    let user: string | undefined;
    if (auth?.startsWith('Basic ')) {
      const [u, ...rest] = Buffer.from(auth.slice(6), 'base64').toString().split(':');
      if (users[u] !== rest.join(':')) { res.writeHead(401, { 'content-type': 'application/json' }).end('{"details":"wrong credentials"}'); return; }
      user = u;
    }
    const access = user
      ? url.searchParams.getAll('scope').flatMap((s) => {
        const [type, name, actions] = s.split(':');
        return type === 'repository' ? [{ type, name, actions: actions.split(',') }] : [];
      })
      : [];
    const now = Math.floor(Date.now() / 1000);
    const header = { typ: 'JWT', alg: 'RS256', x5c: [certDer] };
    const claims = { iss: issuer, sub: user ?? '', aud: service, exp: now + 300, nbf: now - 10, iat: now, jti: randomUUID(), access };
    const signingInput = `${b64(header)}.${b64(claims)}`;
    const token = `${signingInput}.${sign('sha256', Buffer.from(signingInput), key).toString('base64url')}`;
    state.issued++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token, access_token: token, expires_in: 300 }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    realm: `http://127.0.0.1:${port}/token`, service, issuer, rootCertBundle: certPath,
    get issued() { return state.issued; },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
