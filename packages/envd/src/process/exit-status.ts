import { constants } from 'node:os';

/** How a process ended, in the shape of E2B's EndEvent (which mirrors Go's os.ProcessState). */
export interface ExitInfo {
  exitCode: number;
  exited: boolean;
  status: string;
  error?: string;
}

// Go's descriptions of signals, used in "signal: <description>" statuses.
const signalDescriptions: Record<string, string> = {
  SIGHUP: 'hangup',
  SIGINT: 'interrupt',
  SIGQUIT: 'quit',
  SIGILL: 'illegal instruction',
  SIGTRAP: 'trace/breakpoint trap',
  SIGABRT: 'aborted',
  SIGBUS: 'bus error',
  SIGFPE: 'floating point exception',
  SIGKILL: 'killed',
  SIGUSR1: 'user defined signal 1',
  SIGSEGV: 'segmentation fault',
  SIGUSR2: 'user defined signal 2',
  SIGPIPE: 'broken pipe',
  SIGALRM: 'alarm clock',
  SIGTERM: 'terminated',
  SIGXCPU: 'CPU time limit exceeded',
  SIGXFSZ: 'file size limit exceeded',
};

export function exitInfo(code: number | null, signal: NodeJS.Signals | number | null): ExitInfo {
  if (code !== null && (signal === null || signal === 0)) {
    const status = `exit status ${code}`;
    return code === 0 ? { exitCode: 0, exited: true, status } : { exitCode: code, exited: true, status, error: status };
  }
  const name = typeof signal === 'number' ? signalName(signal) : (signal ?? 'unknown');
  const status = `signal: ${signalDescriptions[name] ?? name}`;
  return { exitCode: -1, exited: false, status, error: status };
}

function signalName(num: number): string {
  const entry = Object.entries(constants.signals).find(([, value]) => value === num);
  return entry ? entry[0] : `signal ${num}`;
}
