/**
 * Bytes that layer writes under way (captures, downloads) may still put on the disk: taken from
 * the free room each check sees. statfs shows only what is written so far, so ten captures at
 * once each passed the check the room of one passed. A reservation is held whole until its
 * write ends (a tar's progress cannot be read as it goes), so while one runs, what it has
 * written counts twice: the check errs towards refusing.
 */
export class PendingBytes {
  private total = 0;

  get bytes(): number { return this.total; }

  /** Holds `n` bytes until release() (which may be called more than once). */
  reserve(n: number): { release(): void } {
    let held = n;
    this.total += n;
    return {
      release: () => { this.total -= held; held = 0; },
    };
  }
}
