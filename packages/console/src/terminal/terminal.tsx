/**
 * A terminal into a running sandbox: xterm.js drawing a login shell that envd runs with a PTY
 * (envd-pty.ts), reached through the data-plane proxy. Loaded lazily by the sandbox page, so that
 * xterm.js is fetched only when a terminal is opened.
 */
import { FitAddon } from '@xterm/addon-fit';
import { Terminal as XTerm } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, type Api } from '../api.ts';
import { ErrorNote } from '../components/notes.tsx';
import { CONNECTION_LOST, PtySession, envdUrl } from './envd-pty.ts';
import { terminalLinkHandler } from './links.ts';
import { sandboxStopped, whyLost } from './sandbox-lifecycle.ts';
import { terminalTheme } from './theme.ts';

export interface TerminalProps {
  api: Api;
  sandboxId: string;
  /** The session ended by itself (the shell exited, the sandbox went away): why. */
  onClosed?: (reason: string) => void;
  /**
   * The sandbox is being killed: closing then leaves the shell to die with it. Its kill would
   * race the sandbox's (a request cut off or refused, an error in the browser's console).
   */
  sandboxEnding?: boolean;
}

export function Terminal({ api, sandboxId, onClosed, sandboxEnding }: TerminalProps) {
  const box = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | undefined>(undefined);
  // The latest callback, without reopening the session when the parent renders a new one.
  const closed = useRef(onClosed);
  closed.current = onClosed;
  const ending = useRef(sandboxEnding);
  ending.current = sandboxEnding;
  useEffect(() => {
    setError(undefined);
    const view = openTerminal(box.current!, { api, sandboxId, onError: setError, onClosed: (reason) => closed.current?.(reason), ending: () => ending.current === true });
    return () => view.dispose();
  }, [api, sandboxId]);
  return (
    <div class="terminal-view">
      <ErrorNote error={error} />
      <div ref={box} class="terminal" role="group" aria-label="Terminal" />
    </div>
  );
}

interface ViewOptions {
  api: Api;
  sandboxId: string;
  onError: (message: string) => void;
  onClosed: (reason: string) => void;
  /** Read at close: whether the sandbox is being killed (then no kill of the shell). */
  ending: () => boolean;
}

interface SandboxInfo {
  domain?: string | null;
  envdAccessToken?: string;
}

const RESIZE_DEBOUNCE_MS = 100;

/** Wires xterm.js to a PTY session in `el`; dispose() ends both. */
function openTerminal(el: HTMLElement, { api, sandboxId, onError, onClosed, ending }: ViewOptions): { dispose: () => void } {
  const scheme = matchMedia('(prefers-color-scheme: dark)');
  const term = new XTerm({
    theme: terminalTheme(scheme.matches),
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
    fontSize: 14,
    cursorBlink: true,
    scrollback: 5000,
    // not xterm.js's default, which opens any address a sandbox prints (links.ts)
    linkHandler: terminalLinkHandler(),
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(el);
  const paint = () => {
    term.options.theme = terminalTheme(scheme.matches);
    // The box's padding shows around the cells: the same colour as the terminal's.
    el.style.background = term.options.theme.background ?? '';
  };
  paint();
  fit.fit();
  term.focus();

  let session: PtySession | undefined;
  let disposed = false;
  // Typed before the session exists (while the sandbox is looked up): sent once it does.
  const early: Uint8Array[] = [];
  const send = (bytes: Uint8Array) => (session ? session.write(bytes) : early.push(bytes));
  const encoder = new TextEncoder();
  const onData = term.onData((text) => send(encoder.encode(text)));
  // Some mouse reports are raw bytes, one per char code, not UTF-8 text.
  const onBinary = term.onBinary((text) => send(Uint8Array.from(text, (c) => c.charCodeAt(0))));

  let resizeTimer: ReturnType<typeof setTimeout> | undefined;
  const refit = () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (disposed) return;
      fit.fit();
      session?.resize(term.cols, term.rows);
    }, RESIZE_DEBOUNCE_MS);
  };
  const observer = new ResizeObserver(refit);
  observer.observe(el);
  window.addEventListener('resize', refit);
  scheme.addEventListener('change', paint);

  const end = (reason: string) => {
    term.options.disableStdin = true;
    term.write(`\r\n\x1b[2m[session ended: ${reason}]\x1b[0m\r\n`);
    onClosed(reason);
  };

  api.get<SandboxInfo>(`/sandboxes/${encodeURIComponent(sandboxId)}`)
    .then((sandbox) => {
      if (disposed) return undefined;
      if (!sandbox.domain) throw new Error('the API did not say under which domain the sandbox is reached');
      session = new PtySession({
        baseUrl: envdUrl(location.protocol, sandboxId, sandbox.domain),
        accessToken: sandbox.envdAccessToken,
        cols: term.cols,
        rows: term.rows,
        onOutput: (bytes) => term.write(bytes),
        onError,
      });
      for (const bytes of early.splice(0)) session.write(bytes);
      return session.run();
    })
    .then(async (reason) => {
      if (disposed || reason === undefined) return;
      const why = reason === CONNECTION_LOST ? await whyLost(api, sandboxId) : reason;
      if (!disposed) end(why);
    })
    .catch((err: unknown) => {
      if (disposed) return;
      term.options.disableStdin = true;
      onError(`Could not open a terminal: ${errorText(err)}`);
    });

  return {
    dispose() {
      disposed = true;
      clearTimeout(resizeTimer);
      observer.disconnect();
      window.removeEventListener('resize', refit);
      scheme.removeEventListener('change', paint);
      onData.dispose();
      onBinary.dispose();
      // Not when the sandbox was paused (the page closes its terminal then): the kill would wake it.
      // Nor when it is being killed.
      session?.close(async () => !ending() && !(await sandboxStopped(api, sandboxId)));
      term.dispose();
    },
  };
}
