/**
 * The shapes of the node routes (docs/api.md, "Nodes"; admin key): a node, its labels and its
 * drain, as the public OpenAPI document names them (public-api-schemas.ts re-exports them).
 */

const str = { type: 'string' } as const;
const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;
const stringList = { type: 'array', items: { type: 'string' } } as const;

/** A node as the master reports it; its fields are the master's (docs/api.md). */
export const Node = { type: 'object', additionalProperties: true } as const;

export const NodeLabels = {
  type: 'object',
  required: ['labels'],
  properties: { labels: stringMap },
} as const;

export const NodeLabelNames = {
  type: 'object',
  required: ['names'],
  properties: { names: stringList },
} as const;

/** What a drain did (docs/cluster.md, "Draining a node"). */
export const NodeDrain = {
  type: 'object',
  description: 'The latest drain of a node (docs/cluster.md, "Draining a node")',
  required: ['node', 'state', 'total', 'remaining', 'moved', 'stored', 'failed', 'startedAt'],
  properties: {
    node: Node,
    state: {
      type: 'string', enum: ['running', 'done', 'stopped', 'interrupted'],
      description: 'running: under way; done: every sandbox was gone over; stopped: the node was undrained first; interrupted: the master running it stopped (drain again)',
    },
    total: { type: 'integer', minimum: 0, description: 'Sandboxes on the node when the drain started' },
    remaining: { type: 'integer', minimum: 0, description: 'Of those, how many the drain has yet to go over' },
    startedAt: { type: 'string', format: 'date-time' },
    finishedAt: { type: 'string', format: 'date-time' },
    moved: { ...stringList, description: 'Running sandboxes paused, stored and resumed on another node' },
    stored: { ...stringList, description: 'Paused sandboxes whose state is now in the artifact store; they resume on another node' },
    failed: {
      type: 'array', description: 'What could not be moved, and why',
      items: { type: 'object', required: ['sandboxId', 'message'], properties: { sandboxId: str, message: str }, additionalProperties: false },
    },
  },
  additionalProperties: false,
} as const;
