import type { FastifyInstance } from 'fastify';
import { notFound, type Coordination, type Logger, type SvcConfig } from '@svc/common';
import type { Db } from '../db/connect.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { TemplateResolver } from '../sandboxes/ports.ts';

export interface TemplatesDeps {
  app: FastifyInstance;
  db: Db;
  nodes: NodeRegistry;
  coordination: Coordination;
  logger: Logger;
}

export interface TemplatesModule {
  resolver: TemplateResolver;
  onNodeRegistered(nodeId: string): void;
  close(): Promise<void>;
}

/** Placeholder until the template module lands: no templates exist. */
export async function startTemplates(_cfg: SvcConfig, _deps: TemplatesDeps): Promise<TemplatesModule> {
  return {
    resolver: {
      async resolveForCreate(ref: string) { throw notFound(`template ${ref} not found`, 130404); },
      async idsFor(ref: string) { return [ref]; },
    },
    onNodeRegistered() {},
    async close() {},
  };
}
