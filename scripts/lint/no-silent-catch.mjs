/**
 * ESLint rule: a caught error is handled, logged with its context, or left alone on purpose with
 * a comment inside saying why (docs/design.md, "No silent failure"). Flags, when they hold no comment:
 * - `catch {}` blocks;
 * - empty rejection callbacks: `.catch(() => {})`, `.catch(function () {})`, `.then(ok, () => {})`;
 * - rejection callbacks that turn every error into a constant: `.catch(() => null)`, `() => undefined`,
 *   `() => false`, `() => ''`, `() => 0`, `() => []`, `() => ({})`, `() => void 0` (also under `as`/`!`),
 *   and a block body that only returns one (`{ return null; }`, `{ return; }`), given to `.catch(...)` or as the
 *   second argument of `.then(ok, ...)`.
 * An expression body cannot hold the reason, so a constant result passes only as a block body with a
 * comment inside: `.catch(() => { /* the file may already be gone *\/ return null; })`.
 */

/** `undefined`, `null`, a literal, `[]`, `{}`, `void 0`, `-1`, a template without `${}`, under `as`/`!`/`satisfies`. */
function isConstant(node) {
  switch (node.type) {
    case 'Literal':
      return true;
    case 'Identifier':
      return node.name === 'undefined';
    case 'TemplateLiteral':
      return node.expressions.length === 0;
    case 'ArrayExpression':
      return node.elements.length === 0;
    case 'ObjectExpression':
      return node.properties.length === 0;
    case 'UnaryExpression':
      return isConstant(node.argument);
    case 'TSAsExpression':
    case 'TSSatisfiesExpression':
    case 'TSNonNullExpression':
    case 'TSTypeAssertion':
      return isConstant(node.expression);
    default:
      return false;
  }
}

/** The rejection callback of a call, if the call is `x.catch(fn)` or `x.then(ok, fn)`. */
function rejectionHandler(node) {
  const callee = node.callee;
  if (callee.type !== 'MemberExpression' || callee.computed || callee.property.type !== 'Identifier') return undefined;
  const fn = callee.property.name === 'catch' ? node.arguments[0] : callee.property.name === 'then' ? node.arguments[1] : undefined;
  return fn && (fn.type === 'ArrowFunctionExpression' || fn.type === 'FunctionExpression') ? fn : undefined;
}

export default {
  meta: {
    type: 'problem',
    docs: { description: 'forbid empty catch blocks and silent rejection callbacks (empty or returning a constant) without a comment saying why' },
    schema: [],
    messages: {
      block: 'Empty catch block: handle the error, log it with its context, or say in a comment why silence is right.',
      callback: 'Empty .catch() callback: handle the error, log it with its context, or say in a comment inside it why silence is right.',
      constant:
        '`.catch(() => constant)` turns every error into a value: handle it, log it with its context, or write a block body with a comment saying why silence is right.',
    },
  },
  create(context) {
    const source = context.sourceCode;
    const uncommented = (block) => source.getCommentsInside(block).length === 0;
    const silent = (block) => block.body.length === 0 && uncommented(block);
    const returnsConstant = (block) =>
      block.body.length === 1 && block.body[0].type === 'ReturnStatement' && (block.body[0].argument === null || isConstant(block.body[0].argument)) && uncommented(block);
    return {
      CatchClause(node) {
        if (silent(node.body)) context.report({ node, messageId: 'block' });
      },
      CallExpression(node) {
        const fn = rejectionHandler(node);
        if (!fn) return;
        if (fn.body.type === 'BlockStatement') {
          if (silent(fn.body)) context.report({ node: fn, messageId: 'callback' });
          else if (returnsConstant(fn.body)) context.report({ node: fn, messageId: 'constant' });
        } else if (isConstant(fn.body)) {
          context.report({ node: fn, messageId: 'constant' });
        }
      },
    };
  },
};
