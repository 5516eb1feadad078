import type { MessageInitShape } from '@bufbuild/protobuf';
import { ConnectError, toConnectError } from '../connect/code.ts';
import { Keepalive, keepaliveIntervalMs } from '../connect/keepalive.ts';
import type { CallContext, Send } from '../connect/router.ts';
import type { WatchDirResponseSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { DirWatcher, type ChangeEvent } from './dir-watcher.ts';
import type { EventConverter } from './watch-events.ts';

/**
 * Events a WatchDir stream may hold for a client that reads slower than they come: counted while
 * a send waits for the socket to drain, they are the events of the batches queued behind the one
 * being sent. Past it the stream ends with `resource_exhausted` (a client that never read once
 * grew envd by half a gigabyte in 20 s). The batch being sent does not count, however large: a
 * whole new subtree is one batch (`mv node_modules project/` under a recursive watch), and a
 * client that reads is never cut off for it. The socket's own buffers hold a few MB more on top.
 */
export const MAX_UNSENT_EVENTS = 10_000;

/**
 * Streams a directory's changes to one client (filesystem.Filesystem/WatchDir): the start event,
 * the changes, keepalives while it is quiet. Each event waits until the client took the ones
 * before it. Resolves when the client goes away; rejects when watching fails or the client
 * falls MAX_UNSENT_EVENTS behind.
 */
export function streamWatch(path: string, recursive: boolean, convert: EventConverter, ctx: CallContext, send: Send<MessageInitShape<typeof WatchDirResponseSchema>>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    /** Batches not taken up for sending yet, and how many events they hold. */
    const queue: ChangeEvent[][] = [];
    let queued = 0;
    /** Set while a send waits for the socket to drain: only then is the client behind. */
    let waiting = false;
    let sending = false;
    let keepalive: Keepalive | undefined;
    let watcher: DirWatcher | undefined;
    let done = false;
    const stop = () => {
      done = true;
      queue.length = 0;
      keepalive?.stop();
      watcher?.close();
      ctx.signal.removeEventListener('abort', onAbort);
    };
    const fail = (err: ConnectError) => {
      if (done) return;
      stop();
      reject(err);
    };
    const onAbort = () => {
      stop();
      resolve();
    };
    /** Ends the stream when the client is behind by more than the limit; true when it did. */
    const tooFarBehind = () => {
      if (!waiting || queued <= MAX_UNSENT_EVENTS) return false;
      fail(new ConnectError('resource_exhausted', `the client fell more than ${MAX_UNSENT_EVENTS} events behind; the watch of ${path} was stopped`));
      return true;
    };
    const sendQueued = async () => {
      if (sending) return;
      sending = true;
      try {
        while (!done && queue.length > 0) {
          const changes = queue.shift()!;
          queued -= changes.length;
          for (const filesystem of await convert(changes)) {
            if (done) return;
            const drained = send({ event: { case: 'filesystem', value: filesystem } });
            if (!drained) continue;
            waiting = true;
            if (tooFarBehind()) return;
            await drained;
            waiting = false;
          }
          keepalive?.reset();
        }
      } catch (err) {
        fail(toConnectError(err, `watching ${path}`));
      } finally {
        sending = false;
        waiting = false;
      }
    };
    ctx.signal.addEventListener('abort', onAbort);
    DirWatcher.open(path, recursive, {
      events: (changes) => {
        if (done) return;
        queue.push(changes);
        queued += changes.length;
        if (tooFarBehind()) return;
        void sendQueued();
      },
      error: fail,
    }).then(
      (opened) => {
        watcher = opened;
        if (done) return opened.close();
        send({ event: { case: 'start', value: {} } });
        keepalive = new Keepalive(keepaliveIntervalMs(ctx.requestHeaders), () => send({ event: { case: 'keepalive', value: {} } }));
      },
      (err: unknown) => fail(toConnectError(err)),
    );
  });
}
