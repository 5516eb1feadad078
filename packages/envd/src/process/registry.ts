import { ConnectError } from '../connect/code.ts';
import type { ProcessSelector } from '@svc/contracts/envd/process/process_pb';
import type { ManagedProcess } from './managed-process.ts';

/** How long an exited process can still be reached by Connect, to learn its exit code. */
const retentionMs = 30_000;

/** The processes envd started: running ones, and recently exited ones for late Connects. */
export class ProcessRegistry {
  private readonly running = new Map<number, ManagedProcess>();
  private readonly exited = new Map<number, ManagedProcess>();

  add(proc: ManagedProcess): void {
    this.exited.delete(proc.pid);
    if (proc.tag !== undefined) {
      for (const [pid, old] of this.exited) if (old.tag === proc.tag) this.exited.delete(pid);
    }
    this.running.set(proc.pid, proc);
    proc.subscribe({
      output: () => {},
      end: () => {
        if (this.running.get(proc.pid) !== proc) return;
        this.running.delete(proc.pid);
        this.exited.set(proc.pid, proc);
        setTimeout(() => {
          if (this.exited.get(proc.pid) === proc) this.exited.delete(proc.pid);
        }, retentionMs).unref();
      },
    });
  }

  list(): ManagedProcess[] {
    return [...this.running.values()];
  }

  /** A running process; `not_found` otherwise. */
  findRunning(selector: ProcessSelector | undefined): ManagedProcess {
    const proc = this.lookup(this.running, selector);
    if (!proc) throw notFound(selector);
    return proc;
  }

  /** A running or recently exited process; `not_found` otherwise. */
  findRunningOrExited(selector: ProcessSelector | undefined): ManagedProcess {
    const proc = this.lookup(this.running, selector) ?? this.lookup(this.exited, selector);
    if (!proc) throw notFound(selector);
    return proc;
  }

  private lookup(map: Map<number, ManagedProcess>, selector: ProcessSelector | undefined): ManagedProcess | undefined {
    const s = selector?.selector;
    if (s?.case === 'pid') return map.get(s.value);
    if (s?.case === 'tag') {
      for (const proc of map.values()) if (proc.tag === s.value) return proc;
      return undefined;
    }
    throw new ConnectError('invalid_argument', 'process selector must set pid or tag');
  }
}

function notFound(selector: ProcessSelector | undefined): ConnectError {
  const s = selector?.selector;
  return new ConnectError('not_found', s?.case === 'tag' ? `process with tag ${s.value} not found` : `process with pid ${s?.value} not found`);
}
