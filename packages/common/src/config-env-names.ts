/**
 * SVC_* variables the configuration does not know. A misspelt one (SVC_PLATFORM_NETWORK for
 * SVC_PLATFORM_NETWORKS) was ignored without a word, and the platform ran on the default the
 * operator meant to change (found by a review, 2026-12). Each is named once per process; not
 * refused, since the CLI, the guest programs, the tests and the benches read SVC_* variables of
 * their own from the same environment (listed below).
 */

/** SVC_* variables read outside the configuration (grep `SVC_` in the repository). */
const OTHER_NAMES = new Set([
  'SVC_CONFIG', 'SVC_LOCAL_VOLUME_ROOT', 'SVC_LOG_LEVEL', 'SVC_DEBUG', 'SVC_BIN',
  // The CLI's (endpoint.ts, commands/*).
  'SVC_API_URL', 'SVC_SANDBOX_URL', 'SVC_TEMPLATE_ID', 'SVC_POLL_INTERVAL_MS', 'SVC_REGISTRY_PASSWORD', 'SVC_WEBHOOK_SECRET',
  // The proxies' worker processes, set by their parent.
  'SVC_WORKER_ROLE', 'SVC_WORKER_SERVICE', 'SVC_WORKER_LOG_FILE',
  // The guest kernel's and the runtimes' (scripts/guest-kernel*.sh, node-agent).
  'SVC_GUEST_KERNEL', 'SVC_GUEST_KERNEL_ROOT', 'SVC_KERNEL_BUILD_JOBS', 'SVC_MICROVM_KERNEL_LOG', 'SVC_GVISOR_PLATFORM',
  'SVC_STAT_SHIM', 'SVC_SPAWNER', 'SVC_SUDO_HELPER', 'SVC_MCP_GATEWAY_DIR', 'SVC_CODE_INTERPRETER_BUNDLE', 'SVC_EGRESS_CA_SHA256',
  'SVC_E2B_SDK', 'SVC_LINT_ROOT',
]);

/** Families of variables other programs own: the guest's envd and code interpreter, the sudo helper, tests, benches, CI. */
const OTHER_PREFIXES = ['SVC_ENVD_', 'SVC_CODE_INTERPRETER_', 'SVC_SUDO_', 'SVC_TEST_', 'SVC_BENCH_', 'SVC_FUZZ_', 'SVC_CI_'];

const warned = new Set<string>();

/**
 * Warns (once per process for each name) of variables that look like svc's (any case) but that
 * neither the configuration (`known`: its names and their older spellings) nor another part of
 * svc reads.
 */
export function warnUnknownSvcNames(env: NodeJS.ProcessEnv, known: ReadonlySet<string>, warn: (m: string) => void): void {
  for (const name of Object.keys(env)) {
    if (!/^svc(master)?_/i.test(name) || known.has(name) || OTHER_NAMES.has(name) || OTHER_PREFIXES.some((p) => name.startsWith(p))) continue;
    if (warned.has(name)) continue;
    warned.add(name);
    warn(`${name} is set but svc reads no such variable, so it has no effect: check its spelling against docs/configuration.md`);
  }
}
