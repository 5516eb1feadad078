import { createHash, createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate, type KeyObject } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as der from './der.ts';
import { isIpv4 } from './ipv4.ts';
import { Lru } from './lru.ts';

const OID = {
  commonName: '2.5.4.3',
  ecPublicKey: '1.2.840.10045.2.1',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  sha256WithRsa: '1.2.840.113549.1.1.11',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
} as const;

const KEY_USAGE = { digitalSignature: 0, keyCertSign: 5, cRLSign: 6 } as const;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const CA_VALIDITY_MS = 3652 * DAY_MS;
const LEAF_VALIDITY_MS = 365 * DAY_MS;
/** A cached leaf this close to its end is minted again. */
const LEAF_RENEW_BEFORE_MS = DAY_MS;
/** ub-common-name (RFC 5280): a longer name lives in the SAN only. */
const MAX_CN_LENGTH = 64;
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

const CA_COMMON_NAME = 'svc egress root CA';
const CA_CERT_FILE = 'ca.pem';
const CA_KEY_FILE = 'ca-key.pem';

export interface LeafCertificate {
  /** PEM of the leaf alone (the sandbox trusts the root directly). */
  cert: string;
  key: string;
}

interface CachedLeaf extends LeafCertificate {
  notAfterMs: number;
}

interface CaFacts {
  subject: Buffer;
  keyId: Buffer;
  notAfterMs: number;
}

/** A certificate or leaf name the CA refuses to sign: not a DNS name or an IPv4 address. */
class LeafNameError extends Error {}

/**
 * The egress proxy's root CA (baked into templates) and the leaves it signs on the fly for
 * intercepted TLS. One leaf key pair serves every leaf, as mitmproxy does: a leaf then costs one
 * signature, and its key is no more secret than the CA's, which sits beside it.
 */
export class EgressCa {
  private readonly leaves: Lru<string, CachedLeaf>;
  private readonly leafPublicKey: Buffer;
  private readonly leafKeyPem: string;
  private readonly leafKeyId: Buffer;

  private constructor(
    readonly caPem: string,
    private readonly caKey: KeyObject,
    private readonly ca: CaFacts,
    cacheSize: number,
  ) {
    this.leaves = new Lru(cacheSize);
    const pair = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    this.leafPublicKey = pair.publicKey.export({ type: 'spki', format: 'der' });
    this.leafKeyPem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    this.leafKeyId = keyIdentifier(this.leafPublicKey);
  }

  /** The CA of `dir` (ca.pem, ca-key.pem); a new one when neither file exists. */
  static async loadOrCreate(dir: string, opts: { cacheSize?: number } = {}): Promise<EgressCa> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    const certPath = join(dir, CA_CERT_FILE);
    const keyPath = join(dir, CA_KEY_FILE);
    const [certPem, keyPem] = await Promise.all([readOptional(certPath), readOptional(keyPath)]);
    if (certPem === undefined && keyPem === undefined) {
      const created = createRootCa();
      await writePrivately(keyPath, created.keyPem);
      await writePrivately(certPath, created.certPem);
      return EgressCa.fromPem(created.certPem, created.keyPem, opts.cacheSize);
    }
    if (certPem === undefined || keyPem === undefined) {
      throw new Error(`egress CA in ${dir}: ${certPem === undefined ? CA_CERT_FILE : CA_KEY_FILE} is missing while ${certPem === undefined ? CA_KEY_FILE : CA_CERT_FILE} exists; restore it or remove both to make a new CA (templates must then be rebuilt with the new one)`);
    }
    await chmod(keyPath, 0o600);
    return EgressCa.fromPem(certPem, keyPem, opts.cacheSize);
  }

  /**
   * The CA the primary made or loaded (loadOrCreate), as a worker process reads it: never made
   * here, so that no worker could sign with a CA of its own.
   */
  static async load(dir: string, opts: { cacheSize?: number } = {}): Promise<EgressCa> {
    const [certPem, keyPem] = await Promise.all([readFile(join(dir, CA_CERT_FILE), 'utf8'), readFile(join(dir, CA_KEY_FILE), 'utf8')]);
    return EgressCa.fromPem(certPem, keyPem, opts.cacheSize);
  }

  static fromPem(certPem: string, keyPem: string, cacheSize = 10_000): EgressCa {
    const cert = new X509Certificate(certPem);
    const key = createPrivateKey(keyPem);
    if (!cert.checkPrivateKey(key)) throw new Error('egress CA: the private key does not belong to the certificate');
    if (!cert.ca) throw new Error('egress CA: the certificate is not a CA (basicConstraints CA:true)');
    if (key.asymmetricKeyType !== 'ec' && key.asymmetricKeyType !== 'rsa') {
      throw new Error(`egress CA: ${key.asymmetricKeyType} keys are not supported (ECDSA or RSA)`);
    }
    return new EgressCa(cert.toString(), key, readCaFacts(cert.raw), cacheSize);
  }

  /** A leaf for a DNS name or an IPv4 address, from the cache while it has a day left. */
  leafFor(name: string): LeafCertificate {
    const normalized = name.trim().toLowerCase().replace(/\.$/, '');
    const cached = this.leaves.get(normalized);
    if (cached && cached.notAfterMs - Date.now() > LEAF_RENEW_BEFORE_MS) return { cert: cached.cert, key: cached.key };
    const leaf = this.mintLeaf(normalized);
    this.leaves.set(normalized, leaf);
    return { cert: leaf.cert, key: leaf.key };
  }

  private mintLeaf(name: string): CachedLeaf {
    const ip = isIpv4(name);
    if (!ip && !DNS_NAME.test(name)) throw new LeafNameError(`cannot make a certificate for ${JSON.stringify(name)}: not a DNS name or an IPv4 address`);
    const now = Date.now();
    const notBefore = new Date(now - HOUR_MS);
    const notAfterMs = Math.min(now + LEAF_VALIDITY_MS, this.ca.notAfterMs);
    const san = ip
      ? der.implicitPrimitive(7, Buffer.from(name.split('.').map(Number)))
      : der.implicitPrimitive(2, Buffer.from(name, 'ascii'));
    const subject = name.length <= MAX_CN_LENGTH ? distinguishedName(name) : der.sequence();
    const extensions = [
      extension(OID.basicConstraints, true, der.sequence()),
      extension(OID.keyUsage, true, der.namedBits([KEY_USAGE.digitalSignature])),
      extension(OID.extKeyUsage, false, der.sequence(der.oid(OID.serverAuth))),
      // With an empty subject the SAN must be critical (RFC 5280 4.2.1.6).
      extension(OID.subjectAltName, subject.length === 2, der.sequence(san)),
      extension(OID.subjectKeyIdentifier, false, der.octetString(this.leafKeyId)),
      extension(OID.authorityKeyIdentifier, false, der.sequence(der.implicitPrimitive(0, this.ca.keyId))),
    ];
    const cert = signCertificate({
      issuer: this.ca.subject,
      subject,
      notBefore,
      notAfter: new Date(notAfterMs),
      publicKey: this.leafPublicKey,
      extensions,
    }, this.caKey);
    return { cert: toPem(cert), key: this.leafKeyPem, notAfterMs };
  }
}

interface CertificateFields {
  issuer: Buffer;
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  /** SubjectPublicKeyInfo, DER. */
  publicKey: Buffer;
  extensions: Buffer[];
}

/** X.509 v3: TBSCertificate signed with SHA-256 by the issuer's key (RFC 5280 4.1). */
function signCertificate(f: CertificateFields, issuerKey: KeyObject): Buffer {
  const algorithm = issuerKey.asymmetricKeyType === 'rsa'
    ? der.sequence(der.oid(OID.sha256WithRsa), der.nullValue())
    : der.sequence(der.oid(OID.ecdsaWithSha256));
  const tbs = der.sequence(
    der.explicit(0, der.unsignedInteger(2)),
    der.unsignedInteger(randomSerial()),
    algorithm,
    f.issuer,
    der.sequence(der.time(f.notBefore), der.time(f.notAfter)),
    f.subject,
    f.publicKey,
    der.explicit(3, der.sequence(...f.extensions)),
  );
  const signature = sign('sha256', tbs, issuerKey.asymmetricKeyType === 'ec' ? { key: issuerKey, dsaEncoding: 'der' } : issuerKey);
  return der.sequence(tbs, algorithm, der.bitString(signature));
}

/** 16 random bytes, positive, with no leading zero byte (so always exactly 16 in DER). */
function randomSerial(): Buffer {
  const b = randomBytes(16);
  b[0] = (b[0] & 0x7f) | 0x40;
  return b;
}

function createRootCa(): { certPem: string; keyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const name = distinguishedName(CA_COMMON_NAME);
  const now = Date.now();
  const cert = signCertificate({
    issuer: name,
    subject: name,
    notBefore: new Date(now - HOUR_MS),
    notAfter: new Date(now + CA_VALIDITY_MS),
    publicKey: spki,
    extensions: [
      extension(OID.basicConstraints, true, der.sequence(der.boolean(true))),
      extension(OID.keyUsage, true, der.namedBits([KEY_USAGE.keyCertSign, KEY_USAGE.cRLSign])),
      extension(OID.subjectKeyIdentifier, false, der.octetString(keyIdentifier(spki))),
    ],
  }, privateKey);
  return { certPem: toPem(cert), keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

function distinguishedName(commonName: string): Buffer {
  return der.sequence(der.set(der.sequence(der.oid(OID.commonName), der.utf8String(commonName))));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return critical
    ? der.sequence(der.oid(id), der.boolean(true), der.octetString(value))
    : der.sequence(der.oid(id), der.octetString(value));
}

/** RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits. */
function keyIdentifier(spki: Buffer): Buffer {
  const [, bits] = der.children(der.readTlv(spki).content);
  return createHash('sha1').update(bits.content.subarray(1)).digest();
}

/** The issuer name, key identifier and end of validity a leaf needs from its CA certificate. */
function readCaFacts(certDer: Buffer): CaFacts {
  const [tbs] = der.children(der.readTlv(certDer).content);
  const fields = der.children(tbs.content);
  const at = fields[0].tag === 0xa0 ? 1 : 0; // [0] version is optional (v1)
  const validity = der.children(fields[at + 3].content);
  const subject = fields[at + 4];
  const spki = fields[at + 5];
  const extensions = fields.slice(at + 6).find((f) => f.tag === 0xa3);
  return {
    subject: Buffer.from(subject.raw),
    keyId: (extensions && subjectKeyIdOf(extensions.content)) ?? keyIdentifier(spki.raw),
    notAfterMs: parseTime(validity[1]),
  };
}

function subjectKeyIdOf(extensionsContent: Buffer): Buffer | undefined {
  const [list] = der.children(extensionsContent);
  for (const ext of der.children(list.content)) {
    const parts = der.children(ext.content);
    if (der.decodeOid(parts[0].content) !== OID.subjectKeyIdentifier) continue;
    const value = parts[parts.length - 1].content; // the extnValue OCTET STRING's content
    return Buffer.from(der.readTlv(value).content);
  }
  return undefined;
}

function parseTime(t: der.Tlv): number {
  const s = t.content.toString('ascii');
  const full = t.tag === der.DER_TAGS.utcTime ? `${Number(s.slice(0, 2)) >= 50 ? '19' : '20'}${s}` : s;
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(full);
  if (!m) throw new Error(`egress CA: cannot read the certificate's validity end ${JSON.stringify(s)}`);
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
}

function toPem(certDer: Buffer): string {
  const b64 = certDer.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Written under a temporary name and renamed, so a crash never leaves half a file. */
async function writePrivately(path: string, content: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, content, { mode: 0o600 });
  await rename(tmp, path);
}
