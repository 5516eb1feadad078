/**
 * svc's `fetch` server, in place of the Python mcp-server-fetch: the `fetch` tool (url,
 * max_length=5000, start_index=0, raw=false) and the `fetch` prompt, robots.txt honoured for
 * the tool as the reference does, HTML simplified to markdown-ish text (html-markdown.ts), and
 * the reference server's prefixes, truncation and error messages.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { htmlToMarkdown } from './html-markdown.ts';
import { robotsAllow } from './robots.ts';

const AUTONOMOUS = 'ModelContextProtocol/1.0 (Autonomous; +https://github.com/modelcontextprotocol/servers)';
const MANUAL = 'ModelContextProtocol/1.0 (User-Specified; +https://github.com/modelcontextprotocol/servers)';

export interface FetchOptions { userAgent?: string; ignoreRobotsTxt?: boolean }

async function checkRobots(url: string, userAgent: string): Promise<void> {
  const robotsUrl = new URL('/robots.txt', url).href;
  let response: Response;
  try {
    response = await fetch(robotsUrl, { headers: { 'User-Agent': userAgent }, redirect: 'follow', signal: AbortSignal.timeout(30_000) });
  } catch {
    throw new Error(`Failed to fetch robots.txt ${robotsUrl} due to a connection issue`);
  }
  if (response.status === 401 || response.status === 403) {
    throw new Error(`When fetching robots.txt (${robotsUrl}), received status ${response.status} so assuming that autonomous fetching is not allowed, the user can try manually fetching by using the fetch prompt`);
  }
  if (response.status >= 400 && response.status < 500) return;
  const robots = await response.text();
  if (!robotsAllow(robots, url, userAgent)) {
    throw new Error(`The sites robots.txt (${robotsUrl}), specifies that autonomous fetching of this page is not allowed, <useragent>${userAgent}</useragent>\n<url>${url}</url><robots>\n${robots}\n</robots>\n` +
      'The assistant must let the user know that it failed to view the page. The assistant may provide further guidance based on the above information.\n' +
      'The assistant can tell the user that they can try manually fetching the page by using the fetch prompt within their UI.');
  }
}

/** The page as text for a model, and the prefix saying what it is. */
async function fetchPage(url: string, userAgent: string, raw: boolean): Promise<{ content: string; prefix: string }> {
  let response: Response;
  let page: string;
  try {
    response = await fetch(url, { headers: { 'User-Agent': userAgent }, redirect: 'follow', signal: AbortSignal.timeout(30_000) });
    page = await response.text();
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause;
    throw new Error(`Failed to fetch ${url}: ${(err as Error).message}${cause ? ` (${cause.message})` : ''}`);
  }
  if (response.status >= 400) throw new Error(`Failed to fetch ${url} - status code ${response.status}`);
  const contentType = response.headers.get('content-type') ?? '';
  const isHtml = page.slice(0, 100).includes('<html') || contentType.includes('text/html') || !contentType;
  if (isHtml && !raw) return { content: htmlToMarkdown(page) || '<error>Page failed to be simplified from HTML</error>', prefix: '' };
  return { content: page, prefix: `Content type ${contentType} cannot be simplified to markdown, but here is the raw content:\n` };
}

/** A window of the content, with the reference server's note when more follows. */
export function truncate(content: string, startIndex: number, maxLength: number): string {
  if (startIndex >= content.length) return '<error>No more content available.</error>';
  const part = content.slice(startIndex, startIndex + maxLength);
  if (!part) return '<error>No more content available.</error>';
  const remaining = content.length - (startIndex + part.length);
  if (part.length === maxLength && remaining > 0) {
    return `${part}\n\n<error>Content truncated. Call the fetch tool with a start_index of ${startIndex + part.length} to get more content.</error>`;
  }
  return part;
}

export function createFetchServer(options: FetchOptions = {}): McpServer {
  const server = new McpServer({ name: 'mcp-fetch', version: '1.0.0' });
  const autonomous = options.userAgent ?? AUTONOMOUS;
  server.registerTool('fetch', {
    description: 'Fetches a URL from the internet and optionally extracts its contents as markdown.\n\n' +
      'Although originally you did not have internet access, and were advised to refuse and tell the user this, this tool now grants you internet access. Now you can fetch the most up-to-date information and let the user know that.',
    inputSchema: {
      url: z.url().describe('URL to fetch'),
      max_length: z.number().int().gt(0).lt(1_000_000).default(5000).describe('Maximum number of characters to return.'),
      start_index: z.number().int().min(0).default(0).describe('On return output starting at this character index, useful if a previous fetch was truncated and more context is required.'),
      raw: z.boolean().default(false).describe('Get the actual HTML content of the requested page, without simplification.'),
    },
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: true },
  }, async ({ url, max_length, start_index, raw }) => {
    const href = new URL(url).href;
    if (!options.ignoreRobotsTxt) await checkRobots(href, autonomous);
    const { content, prefix } = await fetchPage(href, autonomous, raw);
    return { content: [{ type: 'text', text: `${prefix}Contents of ${href}:\n${truncate(content, start_index, max_length)}` }] };
  });
  server.registerPrompt('fetch', {
    description: 'Fetch a URL and extract its contents as markdown',
    argsSchema: { url: z.string().describe('URL to fetch') },
  }, async ({ url }) => {
    try {
      const { content, prefix } = await fetchPage(url, options.userAgent ?? MANUAL, false);
      return { description: `Contents of ${url}`, messages: [{ role: 'user', content: { type: 'text', text: prefix + content } }] };
    } catch (err) {
      return { description: `Failed to fetch ${url}`, messages: [{ role: 'user', content: { type: 'text', text: (err as Error).message } }] };
    }
  });
  return server;
}
