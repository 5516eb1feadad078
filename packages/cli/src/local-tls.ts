import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface LocalTls {
  /** The local CA that signed the certificate: what clients trust (NODE_EXTRA_CA_CERTS, a browser). */
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The CA was made by this call: clients that trusted the one before must trust this one. */
  newCa: boolean;
}

const DAY = 86_400_000;

/**
 * `svc up --tls`: a local CA (ECDSA P-256), made once per data directory, and a certificate it
 * signs for the sandbox domain and every name under it (`*.D` covers `<port>-<sandboxID>.D`),
 * made again when the domain changes or the certificate nears its end. Made with Debian's
 * openssl. A real install uses a certificate of a public CA instead (proxy.tls_cert_file,
 * proxy.tls_key_file; docs/configuration.md).
 *
 * The CA may sign for the sandbox domain only (a critical X.509 name constraint): users add it
 * to their machines' and browsers' trust, and its key, a file on the platform's host, would
 * otherwise let whoever reads it pass for any site to them. So a later domain the CA does not
 * cover gets a CA of its own (`newCa`), which clients must trust again. A CA made before
 * 2026-12-07 has no constraint and is kept, as users trust it already.
 */
export function ensureLocalTls(dir: string, domain: string): LocalTls {
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/i.test(domain) || domain.length > 200) {
    throw new Error(`--domain ${JSON.stringify(domain)} is not a DNS name with at least two labels (for example sandboxes.example.com)`);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const f = { caFile: join(dir, 'ca.pem'), caKey: join(dir, 'ca-key.pem'), certFile: join(dir, 'sandboxes.pem'), keyFile: join(dir, 'sandboxes-key.pem') };
  let newCa = false;
  if (!existsSync(f.caFile) || !existsSync(f.caKey)) {
    makeCa(f.caFile, f.caKey, domain);
    newCa = true;
  }
  const remade = !leafFits(f.certFile, f.keyFile, f.caFile, domain);
  if (remade) makeLeaf(dir, f, domain);
  // A kept certificate verified when it was made; a new one under an older CA may not.
  if (remade && !newCa && !chainVerifies(f.caFile, f.certFile)) {
    // The CA's name constraint does not cover this domain (the domain changed): a CA of its own.
    makeCa(f.caFile, f.caKey, domain);
    makeLeaf(dir, f, domain);
    newCa = true;
  }
  return { caFile: f.caFile, certFile: f.certFile, keyFile: f.keyFile, newCa };
}

function openssl(args: string[]): Buffer {
  return execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });
}

function makeCa(caFile: string, caKey: string, domain: string): void {
  openssl(['req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-sha256', '-days', '3650',
    '-subj', `/CN=svc local CA for ${domain}`, '-keyout', caKey, '-out', caFile,
    '-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-addext', `nameConstraints=critical,permitted;DNS:${domain}`]);
}

function makeLeaf(dir: string, f: { caFile: string; caKey: string; certFile: string; keyFile: string }, domain: string): void {
  const csr = join(dir, 'sandboxes.csr');
  const ext = join(dir, 'sandboxes.ext');
  writeFileSync(ext, `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.${domain},DNS:${domain}\n`);
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=*.${domain}`, '-keyout', f.keyFile, '-out', csr]);
  openssl(['x509', '-req', '-in', csr, '-CA', f.caFile, '-CAkey', f.caKey, '-CAcreateserial', '-days', '397', '-sha256', '-extfile', ext, '-out', f.certFile]);
}

/** Whether a client trusting the CA accepts the certificate: openssl's verify applies the CA's name constraints, as TLS clients do. */
function chainVerifies(caFile: string, certFile: string): boolean {
  try {
    openssl(['verify', '-CAfile', caFile, certFile]);
    return true;
  } catch {
    // openssl exits 2 and names the failed check (here a name constraint): the answer is no.
    return false;
  }
}

function leafFits(certFile: string, keyFile: string, caFile: string, domain: string): boolean {
  if (!existsSync(certFile) || !existsSync(keyFile)) return false;
  const cert = new X509Certificate(readFileSync(certFile));
  const ca = new X509Certificate(readFileSync(caFile));
  return cert.checkHost(`x.${domain}`) !== undefined && Date.parse(cert.validTo) > Date.now() + 30 * DAY && cert.verify(ca.publicKey);
}
