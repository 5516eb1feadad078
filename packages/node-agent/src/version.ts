export const NODE_AGENT_VERSION = '0.1.0';
