import assert from 'node:assert/strict';
import { test } from 'node:test';
import { safeTerminalLink, terminalLinkHandler } from './links.ts';

test('only http and https links are opened; any other scheme, or a string that is no URL, is not', () => {
  assert.equal(safeTerminalLink('https://example.com/a?b=1'), 'https://example.com/a?b=1');
  assert.equal(safeTerminalLink('HTTP://Example.com'), 'http://example.com/');
  for (const uri of [
    'javascript:alert(document.cookie)', ' javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html,<script>alert(1)</script>',
    'file:///etc/passwd', 'vbscript:msgbox(1)', 'blob:https://example.com/x', 'ssh://host', '//example.com', '/relative', '', 'not a url',
  ]) {
    assert.equal(safeTerminalLink(uri), undefined, uri);
  }
});

test('the handler asks with the address itself, then opens it; a refused prompt or an unsafe link opens nothing', () => {
  const opened: string[] = [];
  const asked: string[] = [];
  let agree = true;
  const handler = terminalLinkHandler({ confirm: (m) => { asked.push(m); return agree; }, open: (href) => opened.push(href) });
  assert.equal(handler.allowNonHttpProtocols, false);
  const click = (uri: string) => handler.activate({} as MouseEvent, uri, { start: { x: 1, y: 1 }, end: { x: 2, y: 1 } });
  click('https://example.com/');
  click('javascript:alert(1)');
  click('file:///etc/passwd');
  assert.deepEqual(opened, ['https://example.com/']);
  assert.equal(asked.length, 1, 'no prompt for a link that is never opened');
  assert.match(asked[0], /\n\nhttps:\/\/example\.com\/$/);
  agree = false;
  click('https://example.com/other');
  assert.deepEqual(opened, ['https://example.com/']);
});
