/**
 * Turns a freshly opened Start or Connect stream into a CommandHandle: the first event
 * must say which process it is about (keepalives may come first).
 */
import { CommandHandle, type CommandHandleHooks } from './command-handle.ts';
import { SandboxError } from './errors.ts';
import { decodeProcessEvent } from './envd/messages.ts';
import type { RpcStream } from './envd/rpc-stream.ts';
import { mapEnvdError } from './envd/transport.ts';

export async function handleFromStream(
  stream: RpcStream<unknown>,
  hooks: (pid: number) => CommandHandleHooks,
): Promise<CommandHandle> {
  try {
    for (;;) {
      const message = await stream.next();
      if (message === undefined) throw new SandboxError('the process stream ended before the process started');
      const ev = decodeProcessEvent(message);
      if (ev?.type === 'keepalive') continue;
      if (ev?.type !== 'start') throw new SandboxError('envd did not start the stream with a start event');
      stream.markStarted();
      return new CommandHandle(ev.pid, stream, hooks(ev.pid));
    }
  } catch (err) {
    stream.close();
    throw mapEnvdError(err);
  }
}
