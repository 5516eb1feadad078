import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface LocalTls {
  /** The local CA that signed the certificate: what clients trust (NODE_EXTRA_CA_CERTS, a browser). */
  caFile: string;
  certFile: string;
  keyFile: string;
}

const DAY = 86_400_000;

/**
 * `svc up --tls`: a local CA (ECDSA P-256), made once per data directory, and a certificate it
 * signs for the sandbox domain and every name under it (`*.D` covers `<port>-<sandboxID>.D`),
 * made again when the domain changes or the certificate nears its end. Made with Debian's
 * openssl. A real install uses a certificate of a public CA instead (proxy.tls_cert_file,
 * proxy.tls_key_file; docs/configuration.md).
 */
export function ensureLocalTls(dir: string, domain: string): LocalTls {
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/i.test(domain) || domain.length > 200) {
    throw new Error(`--domain ${JSON.stringify(domain)} is not a DNS name with at least two labels (for example sandboxes.example.com)`);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const f = { caFile: join(dir, 'ca.pem'), caKey: join(dir, 'ca-key.pem'), certFile: join(dir, 'sandboxes.pem'), keyFile: join(dir, 'sandboxes-key.pem') };
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });

  if (!existsSync(f.caFile) || !existsSync(f.caKey)) {
    openssl(['req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-sha256', '-days', '3650',
      '-subj', '/CN=svc local CA', '-keyout', f.caKey, '-out', f.caFile,
      '-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  }
  if (!leafFits(f.certFile, f.keyFile, f.caFile, domain)) {
    const csr = join(dir, 'sandboxes.csr');
    const ext = join(dir, 'sandboxes.ext');
    writeFileSync(ext, `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.${domain},DNS:${domain}\n`);
    openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=*.${domain}`, '-keyout', f.keyFile, '-out', csr]);
    openssl(['x509', '-req', '-in', csr, '-CA', f.caFile, '-CAkey', f.caKey, '-CAcreateserial', '-days', '397', '-sha256', '-extfile', ext, '-out', f.certFile]);
  }
  return { caFile: f.caFile, certFile: f.certFile, keyFile: f.keyFile };
}

function leafFits(certFile: string, keyFile: string, caFile: string, domain: string): boolean {
  if (!existsSync(certFile) || !existsSync(keyFile)) return false;
  const cert = new X509Certificate(readFileSync(certFile));
  const ca = new X509Certificate(readFileSync(caFile));
  return cert.checkHost(`x.${domain}`) !== undefined && Date.parse(cert.validTo) > Date.now() + 30 * DAY && cert.verify(ca.publicKey);
}
