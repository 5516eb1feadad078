/**
 * Bytes that writes under way (layer uploads, captures, downloads) may still put on a disk: taken
 * from the free room each check sees. statfs shows only what is written so far, so ten writes at
 * once each passed the check the room of one passed (the node agent's layer store and the
 * template center's uploads both saw it). A writer that can count its progress gives back what
 * it wrote with written(); one that cannot (a tar) holds its reservation whole until release(),
 * so what it has written counts twice meanwhile and the check errs towards refusing.
 */
export class PendingBytes {
  private total = 0;

  get bytes(): number { return this.total; }

  /** Promises `n` bytes: written(k) gives back k of them, release() the rest (safe to repeat). */
  reserve(n: number): { written(k: number): void; release(): void } {
    let left = n;
    this.total += n;
    return {
      written: (k) => { const d = Math.min(Math.max(k, 0), left); left -= d; this.total -= d; },
      release: () => { this.total -= left; left = 0; },
    };
  }
}
