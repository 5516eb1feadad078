import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FunctionComponent, VNode } from 'preact';
import { ErrorBoundary } from './error-boundary.tsx';

/** The text and links of a rendered tree, flattened. */
function flatten(node: unknown): { text: string; hrefs: string[] } {
  if (node === null || node === undefined || typeof node === 'boolean') return { text: '', hrefs: [] };
  if (typeof node === 'string' || typeof node === 'number') return { text: String(node), hrefs: [] };
  if (Array.isArray(node)) {
    const parts = node.map(flatten);
    return { text: parts.map((p) => p.text).join(''), hrefs: parts.flatMap((p) => p.hrefs) };
  }
  const v = node as VNode<{ children?: unknown; href?: string }>;
  if (typeof v.type === 'function') return flatten((v.type as FunctionComponent)(v.props));
  const inner = flatten(v.props.children);
  return { text: inner.text, hrefs: [...(v.props.href ? [v.props.href] : []), ...inner.hrefs] };
}

test('a view that throws shows its message and a link back; another route renders the children again', () => {
  const boundary = new ErrorBoundary({ children: 'the page' });
  assert.equal(boundary.render(), 'the page');
  boundary.state = ErrorBoundary.getDerivedStateFromError(new URIError('URI malformed'));
  const shown = flatten(boundary.render());
  assert.match(shown.text, /This page failed: URI malformed/);
  assert.deepEqual(shown.hrefs, ['#/sandboxes']);
});
