/**
 * The MCP server a client session talks to: one per session (the SDK's Server holds one
 * transport), all answering from the same Aggregator, so every session shares the backends.
 * The low-level Server, not McpServer: the tools are the backends' JSON schemas, passed on as is.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema, GetPromptRequestSchema, ListPromptsRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema, ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { Aggregator } from './aggregator.ts';
import type { Log } from './log.ts';

export function frontServer(aggregator: Aggregator, version: string, log: Log): Server {
  const server = new Server({ name: 'svc-mcp-gateway', version }, {
    capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } },
    instructions: aggregator.instructions(),
  });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: aggregator.listTools() }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => aggregator.callTool(request.params, extra));
  server.setRequestHandler(ListPromptsRequestSchema, () => ({ prompts: aggregator.listPrompts() }));
  server.setRequestHandler(GetPromptRequestSchema, (request, extra) => aggregator.getPrompt(request.params, extra));
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: aggregator.listResources() }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: aggregator.listResourceTemplates() }));
  server.setRequestHandler(ReadResourceRequestSchema, (request, extra) => aggregator.readResource(request.params, extra));
  const unsubscribe = aggregator.onListChanged((kind) => {
    const sent = kind === 'tools' ? server.sendToolListChanged() : kind === 'prompts' ? server.sendPromptListChanged() : server.sendResourceListChanged();
    sent.catch((err: Error) => log(`telling a session its ${kind} changed failed: ${err.message}`));
  });
  const onclose = server.onclose;
  server.onclose = () => {
    unsubscribe();
    onclose?.();
  };
  return server;
}
