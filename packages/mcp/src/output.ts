/**
 * Bounds on what a tool hands back: a model's context is small, so long output is cut and the cut
 * is said, never silent.
 */

/** Characters of each command stream (stdout, stderr) and of a run's text kept in a result. */
const MAX_STREAM_CHARS = 50_000;
/**
 * The most output a run_command or run_code may print before it is stopped. Its streams are kept
 * in this process's memory until it ends (the SDK's CommandHandle and Execution), and this process
 * is the API gateway: `yes` for a whole timeout would otherwise grow it by gigabytes.
 */
export const MAX_OUTPUT_CHARS = 16 * 1024 * 1024;
/** Bytes of a file read_file returns as text. */
export const MAX_READ_BYTES = 100_000;
/** Bytes of an image file read_file returns as image content. */
export const MAX_IMAGE_BYTES = 1_000_000;
/** Entries list_files returns. */
export const MAX_LIST_ENTRIES = 1_000;

/** The tail of `text` (where errors and results usually are), with a note of what was cut. */
export function keepTail(text: string, max = MAX_STREAM_CHARS): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  return { text: `[… the first ${text.length - max} characters were cut …]\n${text.slice(text.length - max)}`, truncated: true };
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
