import type { ResultLine } from '@svc/contracts/code-interpreter';

/** The MIME types a result has a field for (E2B's api/models/result.py); the rest go into `extra`. */
const FIELDS: Record<string, keyof Omit<ResultLine, 'type' | 'is_main_result' | 'extra'>> = {
  'text/plain': 'text',
  'text/html': 'html',
  'text/markdown': 'markdown',
  'image/svg+xml': 'svg',
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'application/pdf': 'pdf',
  'text/latex': 'latex',
  'application/json': 'json',
  'application/javascript': 'javascript',
  'e2b/data': 'data',
  'e2b/chart': 'chart',
};

/**
 * A Jupyter MIME bundle (display_data or execute_result content.data) as a result line. The plain
 * text of a quoted string loses its quotes, as E2B's does.
 */
export function resultFromMimeBundle(bundle: Record<string, unknown>, isMainResult: boolean): ResultLine {
  const result: ResultLine = { type: 'result', is_main_result: isMainResult };
  const extra: Record<string, unknown> = {};
  for (const [mime, value] of Object.entries(bundle)) {
    const field = FIELDS[mime];
    if (field) (result as unknown as Record<string, unknown>)[field] = value;
    else extra[mime] = value;
  }
  if (typeof result.text === 'string') result.text = unquoted(result.text);
  if (Object.keys(extra).length) result.extra = extra;
  return result;
}

function unquoted(text: string): string {
  if (text.length >= 2 && ((text.startsWith("'") && text.endsWith("'")) || (text.startsWith('"') && text.endsWith('"')))) return text.slice(1, -1);
  return text;
}
