import { HttpError } from './respond.ts';

interface Weighted {
  encoding: string;
  quality: number;
}

function parse(header: string): Weighted[] {
  return header
    .split(',')
    .map((part) => {
      const [name = '', ...params] = part.split(';').map((s) => s.trim());
      let quality = 1;
      for (const param of params) {
        if (/^q=/i.test(param)) {
          const q = Number(param.slice(2));
          if (!Number.isNaN(q)) quality = q;
        }
      }
      return { encoding: name.toLowerCase(), quality };
    })
    .filter((w) => w.encoding !== '');
}

/** Whether Accept-Encoding still allows an unencoded body (RFC 9110 12.5.3). */
export function identityAcceptable(header: string | undefined): boolean {
  if (!header) return true;
  const encodings = parse(header);
  const identity = encodings.find((e) => e.encoding === 'identity');
  if (identity) return identity.quality > 0;
  const wildcard = encodings.find((e) => e.encoding === '*');
  return !(wildcard && wildcard.quality === 0);
}

/** Picks the response encoding for a download: gzip or identity; 406 if neither is acceptable. */
export function chooseResponseEncoding(header: string | undefined): 'gzip' | 'identity' {
  if (!header) return 'identity';
  const encodings = parse(header).sort((a, b) => b.quality - a.quality);
  const identityOk = identityAcceptable(header);
  for (const { encoding, quality } of encodings) {
    if (quality === 0) continue;
    if (encoding === 'identity') return 'identity';
    if (encoding === 'gzip') return 'gzip';
    if (encoding === '*') return identityOk ? 'identity' : 'gzip';
  }
  if (identityOk) return 'identity';
  throw new HttpError(406, 'no acceptable encoding found, supported: [identity, gzip]');
}
