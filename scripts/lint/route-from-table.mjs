/**
 * ESLint rule: an HTTP route is registered from its contract's route table, never from a path
 * written where it is registered (docs/design.md, "Borders"). A table route is in the table by
 * construction, and each server's routes test holds the table against what the server registers;
 * a literal path would be served with nothing listing it, and no client or fake would know it.
 * Flags, in the sources it is configured for:
 * - `x.get('/path', handler)` and the same with post, put, patch, delete, head, options and all,
 *   when the path is a string or template literal and the last argument a function;
 * - the same with a table route's path (`x.post(TABLE.route.path, handler)`): registered beside
 *   the table, its body and query schemas are not checked;
 * - `x.route({ url: '/path', ... })` with a literal url.
 * Register with `serve(app, TABLE.route, handler)` (packages/contracts/src/route-table.ts) instead.
 * `x.route({ method: 'HEAD', url: TABLE.route.path, ... })` stays possible: a HEAD registered
 * before its GET answers with the GET handler's headers.
 */

const METHODS = new Set(['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'all']);

function isLiteralPath(node) {
  if (!node) return false;
  if (node.type === 'Literal') return typeof node.value === 'string' && node.value.startsWith('/');
  if (node.type === 'TemplateLiteral') return (node.quasis[0]?.value.cooked ?? '').startsWith('/');
  return false;
}

const isFunction = (node) => node && (node.type === 'ArrowFunctionExpression' || node.type === 'FunctionExpression');

/** `SOMETHING.path`: a table route's path, handed to a registration that skips its schemas. */
const isTablePath = (node) => node?.type === 'MemberExpression' && !node.computed && node.property.type === 'Identifier' && node.property.name === 'path';

export default {
  meta: {
    type: 'problem',
    docs: { description: 'register HTTP routes from a route table (serve), not from a literal path' },
    messages: {
      literal: 'route {{path}} is registered from a literal path: add it to its contract\'s route table and register it with serve() (route-table.ts)',
      bypass: 'route {{path}} is registered beside its table: register it with serve() (route-table.ts), which checks its schemas',
    },
    schema: [],
  },
  create(context) {
    return {
      CallExpression(node) {
        const callee = node.callee;
        if (callee.type !== 'MemberExpression' || callee.property.type !== 'Identifier') return;
        const name = callee.property.name;
        if (METHODS.has(name)) {
          const [path] = node.arguments;
          if (node.arguments.length < 2) return;
          const last = node.arguments[node.arguments.length - 1];
          // A client's call (`http.post('/x', body)`) passes data, not a handler; a table path
          // is handed only to a registration (a client calls through call()).
          if (isLiteralPath(path) && isFunction(last)) context.report({ node: path, messageId: 'literal', data: { path: context.sourceCode.getText(path) } });
          else if (isTablePath(path) && (isFunction(last) || last.type === 'Identifier')) context.report({ node: path, messageId: 'bypass', data: { path: context.sourceCode.getText(path) } });
          return;
        }
        if (name === 'route' && node.arguments[0]?.type === 'ObjectExpression') {
          const url = node.arguments[0].properties.find((p) => p.type === 'Property' && p.key.type === 'Identifier' && p.key.name === 'url');
          if (url && isLiteralPath(url.value)) context.report({ node: url.value, messageId: 'literal', data: { path: context.sourceCode.getText(url.value) } });
        }
      },
    };
  },
};
