import { fileSignatureProblem, type SignedFileRequest } from '@svc/common/envd-signature';

/** A list this old is read again before a look-up. */
const FRESH_MS = 1_000;
/** On a miss, a list older than this is read again once: a sandbox made since may have signed. */
const RELOAD_ON_MISS_MS = 100;

/**
 * Which live sandbox's envd access token produced a file URL's signature (one hash per secured
 * sandbox, compared in constant time; docs/benchmarks.md, signed URL look-up). The tokens are
 * read from the database at most about ten times a second, however many look-ups come: each
 * look-up read them before, so a flood of made-up signatures, which anyone may send through a
 * proxy, was a database query apiece. Reads are shared by the look-ups that wait for them.
 */
export class SignerLookup {
  private tokens: Array<{ sandboxId: string; token: string }> = [];
  private loadedAt = 0;
  private loading: Promise<void> | undefined;

  constructor(private readonly load: () => Promise<Array<{ sandboxId: string; token: string }>>) {}

  /** The sandbox that signed it, or undefined. */
  async signerOf(signed: SignedFileRequest): Promise<string | undefined> {
    if (Date.now() - this.loadedAt > FRESH_MS) await this.reload();
    const found = this.match(signed);
    if (found !== undefined || Date.now() - this.loadedAt <= RELOAD_ON_MISS_MS) return found;
    await this.reload();
    return this.match(signed);
  }

  private match(signed: SignedFileRequest): string | undefined {
    for (const tok of this.tokens) if (fileSignatureProblem(signed, tok.token, 0) === undefined) return tok.sandboxId;
    return undefined;
  }

  private reload(): Promise<void> {
    this.loading ??= this.load().then((tokens) => {
      this.tokens = tokens;
      this.loadedAt = Date.now();
    }).finally(() => { this.loading = undefined; });
    return this.loading;
  }
}
