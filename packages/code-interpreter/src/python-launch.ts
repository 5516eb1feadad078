/**
 * Which Python runs kernels, and the command line that starts one without importing anything
 * from the context's working directory.
 *
 * `python3 -m ipykernel_launcher` puts the working directory first on sys.path before it imports
 * the launcher, so an `ipykernel_launcher.py` (or `runpy.py`) planted in a context's cwd ran as
 * root when the context started or restarted. `-P` (Python 3.11+, Debian bookworm's 3.11 in the
 * template) leaves the cwd off sys.path; older Pythons get the same effect from a `-c` line that
 * drops it before anything is imported. The user's code still imports modules from its cwd as in
 * Jupyter: ipykernel's IPython adds '' (the current directory) to sys.path while the kernel starts,
 * after the standard library (InteractiveShellApp.init_path), which is what Jupyter's own
 * launcher relies on too.
 */
import { execFile } from 'node:child_process';

export interface PythonCommand {
  /** The interpreter: a name on the PATH or a path. */
  path: string;
  /** Whether it takes `-P` (3.11 or later). */
  safePath: boolean;
}

/** For Pythons before 3.11: what `-P -m ipykernel_launcher` does, as a `-c` program. */
const LAUNCH_WITHOUT_CWD = 'import sys; del sys.path[0]; import runpy; runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)';

/** The arguments that start a kernel on the connection file. */
export function kernelArgs(python: PythonCommand, connectionFile: string): string[] {
  return [
    // Without it, Python 3.11's frozen modules make the bundled debugger warn at every start.
    '-Xfrozen_modules=off',
    ...(python.safePath ? ['-P', '-m', 'ipykernel_launcher'] : ['-c', LAUNCH_WITHOUT_CWD]),
    '-f', connectionFile,
    // As E2B's kernel config: tracebacks without colour codes, long sequences not cut.
    '--InteractiveShell.colors=NoColor', '--PlainTextFormatter.max_seq_length=0',
  ];
}

let pythonFound: Promise<PythonCommand> | undefined;

/**
 * The Python to run kernels with: SVC_CODE_INTERPRETER_PYTHON, else the first of `python3` on the
 * PATH and Debian's /usr/bin/python3 that has ipykernel (a PATH python of pyenv or a venv may lack it).
 */
export function findPython(): Promise<PythonCommand> {
  pythonFound ??= (async () => {
    const chosen = process.env.SVC_CODE_INTERPRETER_PYTHON;
    const candidates = chosen ? [chosen] : ['python3', '/usr/bin/python3'];
    for (const candidate of candidates) {
      const probe = await probePython(candidate);
      if (probe) return probe;
    }
    pythonFound = undefined; // installed later, it is found at the next context
    throw new Error(chosen
      ? `SVC_CODE_INTERPRETER_PYTHON=${chosen} does not run or has no ipykernel`
      : 'no python3 with ipykernel found (Debian: apt-get install python3-ipykernel)');
  })();
  return pythonFound;
}

/**
 * Whether the Python has ipykernel, and whether it takes -P. The probe drops the cwd from
 * sys.path first, so that it looks where the kernel will (and imports nothing from the service's
 * own cwd).
 */
function probePython(path: string): Promise<PythonCommand | undefined> {
  const program = [
    'import sys',
    'if sys.path[:1] == [""]: del sys.path[0]', // not there under PYTHONSAFEPATH
    'import importlib.util',
    'sys.exit(1) if importlib.util.find_spec("ipykernel_launcher") is None else print(int(sys.version_info >= (3, 11)))',
  ].join('\n');
  return new Promise((resolve) => {
    execFile(path, ['-c', program], { timeout: 10_000 }, (err, stdout) => {
      resolve(err ? undefined : { path, safePath: stdout.trim() === '1' });
    });
  });
}
