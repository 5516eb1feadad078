import assert from 'node:assert/strict';
import { test } from 'node:test';
import { truncate } from './fetch.ts';
import { htmlToMarkdown } from './html-markdown.ts';
import { robotsAllow } from './robots.ts';
import { convertTime, currentTime } from './time.ts';

test('time: the current time and conversions answer as mcp-server-time does', () => {
  const summer = new Date('2025-07-01T10:00:00Z');
  assert.deepEqual(currentTime('Europe/London', summer), { timezone: 'Europe/London', datetime: '2025-07-01T11:00:00+01:00', day_of_week: 'Tuesday', is_dst: true });
  assert.deepEqual(currentTime('UTC', summer), { timezone: 'UTC', datetime: '2025-07-01T10:00:00+00:00', day_of_week: 'Tuesday', is_dst: false });
  const c = convertTime('America/New_York', '09:30', 'Asia/Kathmandu', summer);
  assert.equal(c.source.datetime, '2025-07-01T09:30:00-04:00');
  assert.equal(c.target.datetime, '2025-07-01T19:15:00+05:45');
  assert.equal(c.time_difference, '+9.75h');
  assert.equal(convertTime('Asia/Tokyo', '12:00', 'Europe/Berlin', summer).time_difference, '-7.0h');
  assert.equal(convertTime('UTC', '00:00', 'Asia/Kolkata', summer).time_difference, '+5.5h');
  assert.throws(() => currentTime('Mars/Olympus'), /Invalid timezone: 'No time zone found with key Mars\/Olympus'/);
  assert.throws(() => convertTime('UTC', '25:00', 'UTC'), /Invalid time format. Expected HH:MM \[24-hour format\]/);
  // 02:30 on the spring-forward day does not exist in New York.
  assert.throws(() => convertTime('America/New_York', '02:30', 'UTC', new Date('2025-03-09T12:00:00Z')), /does not exist in America\/New_York on 2025-03-09/);
});

test('fetch: HTML becomes markdown-ish text of its main part', () => {
  const md = htmlToMarkdown(`<html><head><title>T</title><style>p{}</style></head><body><nav>menu</nav>
    <h1>Title &amp; more</h1><p>Some <b>bold</b> and a <a href="/x">link</a>.</p><ul><li>one</li><li>two</li></ul>
    <pre><code>a &lt; b
  indented</code></pre><script>alert(1)</script></body></html>`);
  assert.equal(md, '# Title & more\n\nSome **bold** and a [link](/x).\n\n- one\n- two\n\n```\na < b\n  indented\n```');
});

test('fetch: a window of the content, with the reference note when more follows', () => {
  assert.equal(truncate('abcdef', 0, 10), 'abcdef');
  assert.equal(truncate('abcdef', 0, 4), 'abcd\n\n<error>Content truncated. Call the fetch tool with a start_index of 4 to get more content.</error>');
  assert.equal(truncate('abcdef', 4, 4), 'ef');
  assert.equal(truncate('abcdef', 6, 4), '<error>No more content available.</error>');
});

test('fetch: robots.txt rules for the user agent, else *, longest match first', () => {
  const robots = 'User-agent: *\nDisallow: /private\nAllow: /private/open\n\nUser-agent: ModelContextProtocol\nDisallow: /nomcp$\n';
  const ua = 'ModelContextProtocol/1.0 (Autonomous)';
  assert.equal(robotsAllow(robots, 'http://h/private/x', 'Other/1.0'), false);
  assert.equal(robotsAllow(robots, 'http://h/private/open/y', 'Other/1.0'), true);
  assert.equal(robotsAllow(robots, 'http://h/private/x', ua), true);
  assert.equal(robotsAllow(robots, 'http://h/nomcp', ua), false);
  assert.equal(robotsAllow(robots, 'http://h/nomcp/deeper', ua), true);
  assert.equal(robotsAllow('', 'http://h/a', ua), true);
});
