/**
 * HTML to markdown-ish text for svc's `fetch` server: the page's main part (its <article> or
 * <main>, else <body>) without scripts, styles and navigation, headings as `#`, links as
 * [text](href), lists as `-`, code blocks fenced. A small stand-in for the reference server's
 * readability + markdownify, which are Python.
 */

const ENTITIES: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', mdash: '—', ndash: '–', hellip: '…', copy: '©', reg: '®',
  trade: '™', laquo: '«', raquo: '»', lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', bull: '•', middot: '·', euro: '€',
};

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name: string) => {
    if (name[0] === '#') {
      const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

const stripTags = (html: string) => html.replace(/<[^>]*>/g, '');
const attr = (tag: string, name: string) => new RegExp(`\\b${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, 'i').exec(tag)?.slice(1).find((v) => v !== undefined) ?? '';

export function htmlToMarkdown(html: string): string {
  let s = html.replace(/<!--[\s\S]*?-->/g, '');
  s = s.replace(/<(script|style|noscript|template|svg|head|iframe|nav|footer|form|button|select)\b[\s\S]*?<\/\1\s*>/gi, '');
  const main = /<(article|main)\b[^>]*>([\s\S]*)<\/\1\s*>/i.exec(s) ?? /<body\b[^>]*>([\s\S]*)<\/body\s*>/i.exec(s);
  if (main) s = main[main.length - 1];
  // Code blocks keep their text as is: set aside until the rest is flattened.
  const blocks: string[] = [];
  s = s.replace(/<pre\b[^>]*>([\s\S]*?)<\/pre\s*>/gi, (_, body: string) => {
    blocks.push(`\n\n\`\`\`\n${decodeEntities(stripTags(body)).replace(/\n+$/, '')}\n\`\`\`\n\n`);
    return `\u0000${blocks.length - 1}\u0000`;
  });
  s = s.replace(/<h([1-6])\b[^>]*>([\s\S]*?)<\/h\1\s*>/gi, (_, level: string, body: string) => `\n\n${'#'.repeat(Number(level))} ${stripTags(body).trim()}\n\n`);
  s = s.replace(/<a\b([^>]*)>([\s\S]*?)<\/a\s*>/gi, (_, attrs: string, body: string) => {
    const text = stripTags(body).trim();
    const href = attr(attrs, 'href');
    return href && text && !href.startsWith('javascript:') ? `[${text}](${href})` : text;
  });
  s = s.replace(/<img\b([^>]*)>/gi, (_, attrs: string) => (attr(attrs, 'alt') ? `![${attr(attrs, 'alt')}](${attr(attrs, 'src')})` : ''));
  s = s.replace(/<(strong|b)\b[^>]*>([\s\S]*?)<\/\1\s*>/gi, (_, __, body: string) => `**${body}**`);
  s = s.replace(/<(em|i)\b[^>]*>([\s\S]*?)<\/\1\s*>/gi, (_, __, body: string) => `*${body}*`);
  s = s.replace(/<code\b[^>]*>([\s\S]*?)<\/code\s*>/gi, (_, body: string) => `\`${body}\``);
  s = s.replace(/<li\b[^>]*>/gi, '\n- ');
  s = s.replace(/<br\s*\/?>/gi, '\n');
  s = s.replace(/<hr\b[^>]*>/gi, '\n\n---\n\n');
  s = s.replace(/<\/?(p|div|section|article|main|header|aside|ul|ol|table|tr|blockquote|dl|dt|dd|figure|h[1-6])\b[^>]*>/gi, '\n\n');
  s = s.replace(/<\/t[dh]\s*>/gi, ' | ');
  s = decodeEntities(stripTags(s));
  s = s.split('\n').map((line) => line.replace(/[ \t\r\f\v]+/g, ' ').trim()).join('\n');
  s = s.replace(/\n{3,}/g, '\n\n').trim();
  return s.replace(/\u0000(\d+)\u0000/g, (_, i: string) => blocks[Number(i)]).replace(/\n{3,}/g, '\n\n').trim();
}
