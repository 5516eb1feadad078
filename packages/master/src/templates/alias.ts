import { invalidTemplateRequest } from './errors.ts';

const ALIAS_RE = /^[a-z0-9-]{1,64}$/;
/** Words that are routes under /svc/template and /templates; an alias there could never be read back. */
const RESERVED = new Set(['from-image', 'redo', 'migrate', 'build', 'artifact', 'compat', 'aliases', 'tags']);

/**
 * Normalises an alias from a request: absent, null and "" mean "no alias" (null). Anything else
 * must be `[a-z0-9-]`, 1 to 64 characters, and must not look like a template id (`tpl-...`), so
 * that a reference is never ambiguous.
 */
export function parseAlias(value: unknown): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string') throw invalidTemplateRequest('alias must be a string');
  if (!ALIAS_RE.test(value)) {
    throw invalidTemplateRequest(`alias "${value.slice(0, 80)}" is invalid: use 1 to 64 characters from [a-z0-9-]`);
  }
  if (value.startsWith('tpl-')) throw invalidTemplateRequest(`alias "${value}" is invalid: the prefix tpl- is reserved for template ids`);
  if (RESERVED.has(value)) throw invalidTemplateRequest(`alias "${value}" is reserved (it is a route name)`);
  return value;
}
