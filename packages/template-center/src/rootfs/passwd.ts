/** Reading and extending /etc/passwd and /etc/group text. */
export interface PasswdEntry { name: string; uid: number; gid: number; home: string; shell: string }

export function parsePasswd(text: string): PasswdEntry[] {
  return text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => {
    const f = l.split(':');
    return { name: f[0], uid: Number(f[2]), gid: Number(f[3]), home: f[5] ?? '', shell: f[6] ?? '' };
  });
}

export function groupIds(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of text.split('\n')) {
    if (!l || l.startsWith('#')) continue;
    const f = l.split(':');
    out.set(f[0], Number(f[2]));
  }
  return out;
}

/** Appends a line, making sure the file ends with a newline first. */
export function appendLine(text: string, line: string): string {
  return `${text}${text && !text.endsWith('\n') ? '\n' : ''}${line}\n`;
}
