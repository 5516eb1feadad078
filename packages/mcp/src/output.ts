/**
 * Bounds on what a tool hands back: a model's context is small, so long output is cut and the cut
 * is said, never silent.
 */

/** Characters of each command stream (stdout, stderr) and of a run's text kept in a result. */
const MAX_STREAM_CHARS = 50_000;
/**
 * The most output a run_command may print before it is stopped. Only what a result returns is
 * kept (OutputTail), but every character still passes through this process, the API gateway:
 * `yes` for a whole timeout would keep it busy. A verbose build (a kernel's make, npm ci with
 * warnings) prints a few MB, so the limit stays where it was before the tail was kept.
 */
export const MAX_COMMAND_OUTPUT_CHARS = 16 * 1024 * 1024;
/**
 * The most output a run_code may print: its results (display data, images) are kept whole until
 * it ends, in the one process every team shares.
 */
export const MAX_CODE_OUTPUT_CHARS = 2 * 1024 * 1024;
/** Characters of an error's message kept in a tool's error result. */
export const MAX_ERROR_CHARS = 8_000;
/** Bytes of a file read_file returns as text. */
export const MAX_READ_BYTES = 100_000;
/** Bytes of an image file read_file returns as image content. */
export const MAX_IMAGE_BYTES = 1_000_000;
/** Entries list_files returns. */
export const MAX_LIST_ENTRIES = 1_000;
/**
 * The largest listing list_files reads from envd. envd answers the whole tree in one message (up
 * to 64 MiB, the SDK's default bound), buffered and parsed before MAX_LIST_ENTRIES cuts it: a
 * sandbox of 300k files made one call cost ~280 MB of this process's heap, and eight calls at once
 * a gigabyte. 8 MiB is ~25k entries, far more than are shown.
 */
export const MAX_LIST_ANSWER_BYTES = 8 * 1024 * 1024;
/**
 * The longest line of the code interpreter's answer run_code takes. Each line is buffered and
 * parsed whole before it is counted against MAX_CODE_OUTPUT_CHARS, so the SDK's default (64 Mi
 * characters) let one line cost this process hundreds of MB; a line twice the output limit is
 * more than a run may print anyway.
 */
export const MAX_CODE_LINE_CHARS = 2 * MAX_CODE_OUTPUT_CHARS;

const cutNote = (n: number) => `[… the first ${n} characters were cut …]`;

/** The tail of `text` (where errors and results usually are), with a note of what was cut. */
export function keepTail(text: string, max = MAX_STREAM_CHARS): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  return { text: `${cutNote(text.length - max)}\n${text.slice(text.length - max)}`, truncated: true };
}

/**
 * The tail of a stream as it arrives: what keepTail would return of the whole, without keeping the
 * whole (16 MB of output held per call, in every call at once, grew the gateway by gigabytes).
 */
export class OutputTail {
  private kept = '';
  /** Characters dropped from the front so far. */
  private dropped = 0;

  constructor(private readonly max = MAX_STREAM_CHARS) {}

  push(text: string): void {
    this.kept += text;
    // cut once twice the bound is reached, so each character is copied a bounded number of times
    if (this.kept.length > 2 * this.max) {
      const cut = this.kept.length - this.max;
      this.dropped += cut;
      this.kept = this.kept.slice(cut);
    }
  }

  /** As keepTail(whole).text: the last `max` characters, with a note of how many were cut. */
  get text(): string {
    const over = this.kept.length - this.max;
    const cut = this.dropped + Math.max(0, over);
    const tail = over > 0 ? this.kept.slice(over) : this.kept;
    return cut > 0 ? `${cutNote(cut)}\n${tail}` : tail;
  }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** Jupyter's tracebacks are coloured with ANSI escapes, which are noise to a model. */
const ANSI_ESCAPE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[A-Za-z]`, 'g');
export function stripAnsi(text: string): string {
  return text.replace(ANSI_ESCAPE, '');
}
