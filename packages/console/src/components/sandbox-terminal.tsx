import { useEffect, useState } from 'preact/hooks';
import type { FunctionComponent } from 'preact';
import { errorText, type Api } from '../api.ts';
import { ErrorNote, Section, StatusNote } from './notes.tsx';
import type { SandboxState } from './sandbox-types.ts';

type TerminalView = FunctionComponent<{ api: Api; sandboxId: string; onClosed?: (reason: string) => void; sandboxEnding?: boolean }>;

/** xterm.js is a large part of the bundle: its chunk is fetched the first time a terminal opens. */
let loading: Promise<TerminalView> | undefined;
function loadTerminal(): Promise<TerminalView> {
  loading ??= import('../terminal/terminal.tsx').then((m) => m.Terminal as TerminalView);
  loading.catch(() => {
    // Shown by the caller; forgotten here so that a failed fetch (a new console deployed
    // meanwhile, the network) is tried again on the next click.
    loading = undefined;
  });
  return loading;
}

/**
 * The Terminal region: "Open terminal" while the sandbox runs; open, the terminal and "Close
 * terminal". When the sandbox stops running the terminal is closed and the note says why.
 */
/** killing: a Kill of the sandbox is under way; the terminal closes at once, leaving the shell to it. */
export function SandboxTerminal({ api, sandboxId, state, killing }: { api: Api; sandboxId: string; state: SandboxState | undefined; killing: boolean }) {
  const [open, setOpen] = useState(false);
  const [View, setView] = useState<TerminalView>();
  const [note, setNote] = useState<string>();
  const [error, setError] = useState<string>();
  const running = state === 'running';

  useEffect(() => {
    if (open && killing) {
      setOpen(false);
      setNote('Terminal closed: the sandbox is being killed.');
    } else if (open && state !== undefined && !running) {
      setOpen(false);
      setNote(`Terminal closed: the sandbox is ${state}.`);
    }
  }, [open, state, running, killing]);

  const openIt = async () => {
    setError(undefined);
    setNote(undefined);
    try {
      const T = await loadTerminal();
      // A component is a function: set it through the updater form, not as one.
      setView(() => T);
      setOpen(true);
    } catch (err) {
      setError(`The terminal could not be loaded: ${errorText(err)}`);
    }
  };

  return (
    <Section title="Terminal" actions={open
      ? <button type="button" onClick={() => { setOpen(false); setNote('Terminal closed.'); }}>Close terminal</button>
      : <button type="button" disabled={!running} onClick={() => void openIt()}>Open terminal</button>}>
      <ErrorNote error={error} />
      <StatusNote text={note} />
      {open && View ? <View api={api} sandboxId={sandboxId} sandboxEnding={killing} onClosed={(reason) => setNote(`The terminal session ended: ${reason}.`)} /> : null}
      {!open && !running && state ? <p class="muted">A terminal opens on a running sandbox only.</p> : null}
    </Section>
  );
}
