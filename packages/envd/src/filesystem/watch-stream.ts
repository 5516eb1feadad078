import type { MessageInitShape } from '@bufbuild/protobuf';
import { ConnectError, toConnectError } from '../connect/code.ts';
import { Keepalive, keepaliveIntervalMs } from '../connect/keepalive.ts';
import type { CallContext, Send } from '../connect/router.ts';
import type { WatchDirResponseSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { DirWatcher } from './dir-watcher.ts';
import type { EventConverter } from './watch-events.ts';

/**
 * Events a WatchDir stream holds for a client that reads slower than they come; past it the
 * stream ends with `resource_exhausted` (a client that never read once grew envd by half a
 * gigabyte in 20 s). The socket's own buffers hold a few MB more on top.
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
    let converted = Promise.resolve();
    let unsent = 0;
    let keepalive: Keepalive | undefined;
    let watcher: DirWatcher | undefined;
    let done = false;
    const stop = () => {
      done = true;
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
    ctx.signal.addEventListener('abort', onAbort);
    DirWatcher.open(path, recursive, {
      events: (changes) => {
        if (done) return;
        unsent += changes.length;
        if (unsent > MAX_UNSENT_EVENTS) {
          fail(new ConnectError('resource_exhausted', `the client fell more than ${MAX_UNSENT_EVENTS} events behind; the watch of ${path} was stopped`));
          return;
        }
        converted = converted
          .then(async () => {
            for (const filesystem of await convert(changes)) {
              if (done) return;
              await send({ event: { case: 'filesystem', value: filesystem } });
            }
            unsent -= changes.length;
            keepalive?.reset();
          })
          .catch((err: unknown) => fail(toConnectError(err, `watching ${path}`)));
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
