/** The daemon's log: timestamped lines on stdout, which the foreground pointed at the log file. */
export type Log = (message: string) => void;

export const log: Log = (message) => {
  process.stdout.write(`${new Date().toISOString()} ${message}\n`);
};

/** The last lines of a stream of text (a server's stderr), for failure reports. */
export class Tail {
  private text = '';
  constructor(private readonly limit = 4000) {}

  push(chunk: string): void {
    this.text = (this.text + chunk).slice(-this.limit);
  }

  /** The kept text from its first whole line, trimmed. */
  toString(): string {
    const cut = this.text.length >= this.limit ? this.text.slice(this.text.indexOf('\n') + 1) : this.text;
    return cut.trim();
  }
}
