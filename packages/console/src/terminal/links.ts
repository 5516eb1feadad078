/**
 * What a click on a hyperlink in the terminal does. A sandbox's programs print OSC 8 hyperlinks
 * whose text need not be their address, and xterm.js's default handler opens any address after a
 * confirm(): a sandbox could send the console's user to a javascript:, data: or file: address, or
 * open it with a handle on the console's window. Only http: and https: addresses are opened, in a
 * new tab without opener or referrer, after a prompt that shows the address itself.
 */
import type { ILinkHandler } from '@xterm/xterm';

/** The address to open for a link's URI: http(s) only, normalised; undefined for anything else. */
export function safeTerminalLink(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined; // not an absolute URL: nothing to open
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
}

export interface LinkActions {
  confirm: (message: string) => boolean;
  /** Opens the address in a new tab, without opener or referrer. */
  open: (href: string) => void;
}

const browserActions: LinkActions = {
  confirm: (message) => window.confirm(message),
  open: (href) => { window.open(href, '_blank', 'noopener,noreferrer'); },
};

/** xterm.js's linkHandler: a safe link opens once the user agrees; any other is ignored. */
export function terminalLinkHandler(actions: LinkActions = browserActions): ILinkHandler {
  return {
    // also refused by xterm.js itself when false, which is its default: said here, not assumed
    allowNonHttpProtocols: false,
    activate(_event, uri) {
      const href = safeTerminalLink(uri);
      if (href === undefined) return;
      if (actions.confirm(`Open this link that the sandbox printed, in a new tab?\n\n${href}`)) actions.open(href);
    },
  };
}
