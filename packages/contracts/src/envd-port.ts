/**
 * envd's port inside every sandbox: E2B's (its SDKs address envd as `49983-<sandboxId>`), which
 * the node agent, the data-plane proxy, the SDK and envd itself agree on.
 */
export const ENVD_PORT = 49983;
