/**
 * The servers of E2B's catalog that svc's gateway runs beyond the reference ones: a few popular
 * names mapped to the npm or PyPI package that implements them, and to how their config entry
 * becomes the server's environment. They are installed under the state directory at start (or
 * ahead, by `mcp-gateway pull`, which `Template.addMcpServer` runs at build), which needs the
 * sandbox's internet. E2B runs its ~200 catalog names as Docker images; svc runs processes, so
 * only what is listed here (plus `github/<owner>/<repo>` and `{ url }` entries) is accepted.
 * The npm versions were checked to exist (`npm view`); PyPI could not be reached from svc's
 * development machine, so the PyPI entry is unpinned.
 */

export interface CatalogServer {
  /** npm packages run on the gateway's Node; PyPI packages in a venv of the image's python3. */
  registry: 'npm' | 'pypi';
  package: string;
  /** The version installed (npm; PyPI's is the latest). */
  version?: string;
  /** The executable: the npm package's `bin` name, or the PyPI package's console script. */
  bin: string;
  /** Config entry field → the environment variable the server reads it from. */
  env: Record<string, string>;
  /** The fields the entry must have (E2B's types mark them required). */
  required: string[];
}

export const CATALOG: Record<string, CatalogServer> = {
  brave: {
    registry: 'npm', package: '@modelcontextprotocol/server-brave-search', version: '0.6.2', bin: 'mcp-server-brave-search',
    env: { apiKey: 'BRAVE_API_KEY' }, required: ['apiKey'],
  },
  github: {
    registry: 'npm', package: '@modelcontextprotocol/server-github', version: '2025.4.8', bin: 'mcp-server-github',
    env: { personalAccessToken: 'GITHUB_PERSONAL_ACCESS_TOKEN' }, required: ['personalAccessToken'],
  },
  slack: {
    // E2B's type marks botToken optional; the server refuses to start without it.
    registry: 'npm', package: '@modelcontextprotocol/server-slack', version: '2025.4.25', bin: 'mcp-server-slack',
    env: { botToken: 'SLACK_BOT_TOKEN', teamId: 'SLACK_TEAM_ID', channelIds: 'SLACK_CHANNEL_IDS' }, required: ['botToken', 'teamId'],
  },
  notion: {
    registry: 'npm', package: '@notionhq/notion-mcp-server', version: '2.5.2', bin: 'notion-mcp-server',
    env: { internalIntegrationToken: 'NOTION_TOKEN' }, required: ['internalIntegrationToken'],
  },
  exa: {
    registry: 'npm', package: 'exa-mcp-server', version: '3.4.1', bin: 'exa-mcp-server',
    env: { apiKey: 'EXA_API_KEY' }, required: ['apiKey'],
  },
  tavily: {
    registry: 'npm', package: 'tavily-mcp', version: '0.2.22', bin: 'tavily-mcp',
    env: { apiKey: 'TAVILY_API_KEY' }, required: ['apiKey'],
  },
  duckduckgo: {
    registry: 'pypi', package: 'duckduckgo-mcp-server', bin: 'duckduckgo-mcp-server', env: {}, required: [],
  },
};

/** `package@version`, as npm and the log name it. */
export function packageSpec(server: CatalogServer): string {
  if (!server.version) return server.package;
  return server.registry === 'npm' ? `${server.package}@${server.version}` : `${server.package}==${server.version}`;
}
