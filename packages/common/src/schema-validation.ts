/**
 * How svc's HTTP servers check requests against their JSON schemas (one per route, from the
 * contract): bodies exactly as sent, no coercion, no defaults filled in; query and path
 * parameters, which arrive as text, coerced to the schema's types (`?limit=10` is 10, a single
 * `?state=running` a one-item list) with their defaults applied. A refusal is a 400 whose message
 * names the field.
 */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormatsPlugin from 'ajv-formats';
import { SvcError } from './errors.ts';

// ajv-formats is CommonJS; seen from ESM its function is the default export's default.
const addFormats = ((addFormatsPlugin as unknown as { default?: typeof addFormatsPlugin }).default ?? addFormatsPlugin);

const base: Options = { allErrors: false, strict: true, allowUnionTypes: true, removeAdditional: false };
const forBodies = new Ajv({ ...base, coerceTypes: false, useDefaults: false });
const forText = new Ajv({ ...base, coerceTypes: 'array', useDefaults: true });
addFormats(forBodies);
addFormats(forText);

/** fastify's validatorCompiler: the body strict, parameters coerced from text. */
export function compileValidator({ schema, httpPart }: { schema: object; httpPart?: string }): ValidateFunction {
  return (httpPart === 'body' ? forBodies : forText).compile(schema);
}

const PART_NAMES: Record<string, string> = { body: '', querystring: 'query parameter ', params: 'path parameter ', headers: 'header ' };

/** fastify's schemaErrorFormatter: the first refusal as a 400 that names the field, with a domain code where the routes have one. */
export function schemaError(errors: ErrorObject[], dataVar: string, code?: number): SvcError {
  const e = errors[0];
  const prefix = PART_NAMES[dataVar] ?? `${dataVar} `;
  const field = e ? fieldName(e) : '';
  const message = !e ? `invalid ${dataVar}`
    : field ? `${prefix}${field} ${describe(e)}`
      : dataVar === 'body' ? `request body ${describe(e)}` : `${dataVar} ${describe(e)}`;
  return new SvcError(400, message, { code });
}

/** `/network/allowOut/0` as `network.allowOut[0]`; a missing property names itself. */
function fieldName(e: ErrorObject): string {
  const parts = e.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (e.keyword === 'required') parts.push(String(e.params.missingProperty));
  if (e.keyword === 'additionalProperties') parts.push(String(e.params.additionalProperty));
  return parts.reduce((name, p) => (/^\d+$/.test(p) ? `${name}[${p}]` : name ? `${name}.${p}` : p), '');
}

function describe(e: ErrorObject): string {
  switch (e.keyword) {
    case 'required': return 'is required';
    case 'additionalProperties': return 'is not a known field';
    case 'type': return `must be ${String(e.params.type).split(',').join(' or ')}`;
    case 'enum': return `must be one of ${(e.params.allowedValues as unknown[]).map(String).join(', ')}`;
    default: return e.message ?? 'is not valid';
  }
}
