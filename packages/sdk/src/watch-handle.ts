/**
 * A directory watch: events from envd's WatchDir stream go to `onEvent` until `stop()`,
 * the watch's deadline, or an error; `onExit` hears how it ended.
 */
import { decodeEventType } from './envd/messages.ts';
import type { RpcStream } from './envd/rpc-stream.ts';
import { mapEnvdError } from './envd/transport.ts';
import type { FilesystemEvent } from './types.ts';

export class WatchHandle {
  private readonly done: Promise<void>;

  /** @internal Made by `files.watchDir`. */
  constructor(
    private readonly events: RpcStream<unknown>,
    private readonly onEvent: (event: FilesystemEvent) => void | Promise<void>,
    private readonly onExit?: (err?: Error) => void | Promise<void>,
  ) {
    this.done = this.consume();
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    this.events.close();
    await this.done;
  }

  private async consume(): Promise<void> {
    let failure: Error | undefined;
    try {
      for await (const message of this.events) {
        const fs = (message as { filesystem?: { name?: string; type?: unknown } } | undefined)?.filesystem;
        if (!fs) continue;
        const type = decodeEventType(fs.type);
        if (!type) continue;
        await this.onEvent({ name: String(fs.name ?? ''), type });
      }
    } catch (err) {
      failure = mapEnvdError(err);
    } finally {
      this.events.close();
    }
    try {
      await this.onExit?.(failure);
    } catch {
      // the caller's exit hook has nowhere to report to
    }
  }
}
