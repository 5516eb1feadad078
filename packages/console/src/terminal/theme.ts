/**
 * The terminal's colours for the system's light and dark schemes. xterm.js draws its own canvas of
 * cells, so it cannot read the page's CSS variables: these mirror styles.css (--bg, --fg, --accent),
 * with an ANSI palette dark enough to read on white in the light scheme.
 */
import type { ITheme } from '@xterm/xterm';

const dark: ITheme = {
  background: '#111214', foreground: '#e4e6eb', cursor: '#e4e6eb', cursorAccent: '#111214',
  selectionBackground: '#3a4b6e',
  black: '#1b1c1f', red: '#f2777a', green: '#8fd18b', yellow: '#e6c06b', blue: '#7aa6f0', magenta: '#cc99cc', cyan: '#66cccc', white: '#d9dbe0',
  brightBlack: '#6b7079', brightRed: '#ff9a9c', brightGreen: '#a8e6a3', brightYellow: '#ffd98a', brightBlue: '#9cc0ff', brightMagenta: '#e0b3e0', brightCyan: '#8ae6e6', brightWhite: '#ffffff',
};

const light: ITheme = {
  background: '#ffffff', foreground: '#1b1c1f', cursor: '#1b1c1f', cursorAccent: '#ffffff',
  selectionBackground: '#c5d6f5',
  black: '#1b1c1f', red: '#b3261e', green: '#1e7a3c', yellow: '#8a5a00', blue: '#1f5fd6', magenta: '#8e3a9d', cyan: '#0f7580', white: '#5c6068',
  brightBlack: '#4a4e55', brightRed: '#d0342c', brightGreen: '#248f47', brightYellow: '#a06a00', brightBlue: '#2b6fe8', brightMagenta: '#a347b3', brightCyan: '#138a96', brightWhite: '#3c3f45',
};

export function terminalTheme(isDark: boolean): ITheme {
  return isDark ? dark : light;
}
