import { ConnectError } from '../connect/code.ts';
import type { ServiceImpl } from '../connect/router.ts';
import { Signal, type Process, type ProcessInput } from '@svc/contracts/envd/process/process_pb';
import type { EnvdState } from '../state.ts';
import { streamProcessEvents } from './event-stream.ts';
import type { ProcessLauncher } from './launcher.ts';
import type { ManagedProcess } from './managed-process.ts';
import type { ProcessRegistry } from './registry.ts';

const KILL_SETTLE_MS = 2_000;

/** process.Process: start, attach to, feed and signal processes in the sandbox. */
export function processService(state: EnvdState, registry: ProcessRegistry, launcher: ProcessLauncher): ServiceImpl<typeof Process> {
  return {
    list() {
      return {
        processes: registry.list().map((p) => ({ pid: p.pid, tag: p.tag, config: p.config })),
      };
    },

    async start(request, ctx, send) {
      const user = state.userFromHeaders(ctx.requestHeaders);
      const proc = await launcher.launch(request, user);
      registry.add(proc);
      if (ctx.timeoutMs) proc.killAfter(ctx.timeoutMs);
      await streamProcessEvents(proc, ctx, send);
    },

    async connect(request, ctx, send) {
      await streamProcessEvents(registry.findRunningOrExited(request.process), ctx, send);
    },

    update(request) {
      const proc = registry.findRunning(request.process);
      const size = request.pty?.size;
      if (size) proc.resize(size.cols, size.rows);
      return {};
    },

    async sendInput(request) {
      await writeInput(registry.findRunning(request.process), request.input);
      return {};
    },

    async streamInput(requests) {
      let proc: ManagedProcess | undefined;
      for await (const request of requests) {
        const event = request.event;
        if (event.case === 'start') proc = registry.findRunning(event.value.process);
        else if (event.case === 'data') {
          if (!proc) throw new ConnectError('failed_precondition', 'input stream must begin with a start event naming the process');
          await writeInput(proc, event.value.input);
        }
      }
      return {};
    },

    async sendSignal(request) {
      const proc = registry.findRunning(request.process);
      if (request.signal === Signal.SIGKILL) {
        proc.signal('SIGKILL');
        // A killed process leaves the list before the answer, so kill-then-list agrees with itself.
        await proc.ended(KILL_SETTLE_MS);
      } else if (request.signal === Signal.SIGTERM) proc.signal('SIGTERM');
      else throw new ConnectError('unimplemented', `unsupported signal ${request.signal}, use SIGTERM or SIGKILL`);
      return {};
    },

    closeStdin(request) {
      registry.findRunning(request.process).closeStdin();
      return {};
    },
  };
}

async function writeInput(proc: ManagedProcess, input: ProcessInput | undefined): Promise<void> {
  const data = input?.input;
  if (data?.case === 'pty') await proc.writePty(data.value);
  else if (data?.case === 'stdin') await proc.writeStdin(data.value);
  else throw new ConnectError('invalid_argument', 'input must set stdin or pty');
}
