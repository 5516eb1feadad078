import type { MessageInitShape } from '@bufbuild/protobuf';
import { Keepalive, keepaliveIntervalMs } from '../connect/keepalive.ts';
import type { CallContext, Send } from '../connect/router.ts';
import type { ProcessEventSchema } from '@svc/contracts/envd/process/process_pb';
import type { ExitInfo } from './exit-status.ts';
import type { ManagedProcess, OutputKind } from './managed-process.ts';

type ProcessEventInit = MessageInitShape<typeof ProcessEventSchema>;

/**
 * Streams a process to one client: the start event (pid), its output, keepalives while it is
 * quiet, and the end event. Resolves when the process ends or the client goes away; the process
 * itself keeps running in the latter case.
 */
export function streamProcessEvents(proc: ManagedProcess, ctx: CallContext, send: Send<{ event: ProcessEventInit }>): Promise<void> {
  return new Promise((resolve) => {
    const emit = (event: ProcessEventInit) => send({ event });
    emit({ event: { case: 'start', value: { pid: proc.pid } } });

    const keepalive = new Keepalive(keepaliveIntervalMs(ctx.requestHeaders), () => emit({ event: { case: 'keepalive', value: {} } }));
    let releaseHold: (() => void) | undefined;
    let unsubscribe = () => {};
    const finish = () => {
      keepalive.stop();
      unsubscribe();
      releaseHold?.();
      ctx.signal.removeEventListener('abort', finish);
      resolve();
    };
    ctx.signal.addEventListener('abort', finish);

    unsubscribe = proc.subscribe({
      output(kind: OutputKind, data: Buffer) {
        const slow = emit({ event: { case: 'data', value: { output: { case: kind, value: data } } } });
        keepalive.reset();
        if (slow && !releaseHold) {
          const release = proc.holdOutput();
          releaseHold = release;
          void slow.then(() => {
            release();
            if (releaseHold === release) releaseHold = undefined;
          });
        }
      },
      end(exit: ExitInfo) {
        emit({ event: { case: 'end', value: exit } });
        finish();
      },
    });
  });
}
