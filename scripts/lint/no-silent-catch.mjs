/**
 * ESLint rule: a caught error is handled, logged with its context, or left alone on purpose with
 * a comment inside saying why (docs/design.md, "No silent failure"). Flags `catch {}` blocks and
 * empty callbacks given to `.catch(...)` (`.catch(() => {})`, `.catch(function () {})`) when
 * they hold no comment.
 */
export default {
  meta: {
    type: 'problem',
    docs: { description: 'forbid empty catch blocks and empty .catch() callbacks without a comment saying why' },
    schema: [],
    messages: {
      block: 'Empty catch block: handle the error, log it with its context, or say in a comment why silence is right.',
      callback: 'Empty .catch() callback: handle the error, log it with its context, or say in a comment inside it why silence is right.',
    },
  },
  create(context) {
    const source = context.sourceCode;
    const silent = (block) => block.body.length === 0 && source.getCommentsInside(block).length === 0;
    return {
      CatchClause(node) {
        if (silent(node.body)) context.report({ node, messageId: 'block' });
      },
      CallExpression(node) {
        const callee = node.callee;
        if (callee.type !== 'MemberExpression' || callee.computed || callee.property.name !== 'catch') return;
        const fn = node.arguments[0];
        if (!fn || (fn.type !== 'ArrowFunctionExpression' && fn.type !== 'FunctionExpression')) return;
        if (fn.body.type === 'BlockStatement' && silent(fn.body)) context.report({ node: fn, messageId: 'callback' });
      },
    };
  },
};
