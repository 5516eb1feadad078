// What other packages may use from the gateway: reading a config as the gateway does (the API or
// a template check can refuse a bad `mcp` early). The program itself runs from dist/mcp-gateway/ (main.ts).
export { parseConfig, knownServers, type ServerSpec } from './config.ts';
export { ConfigError } from './config-fields.ts';
