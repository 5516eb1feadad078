/**
 * The environment a host command runs with: the platform's own, without its secrets. The systemd
 * units load the cluster token, admin tokens, database and Redis URLs and S3 keys as `SVC_*`
 * variables (docs/cluster.md), and every child inherited them: runsc's sentry and gofer, QEMU,
 * mmdebstrap, a volume plugin, so whoever broke out of a sandbox into one of those found
 * cluster-wide credentials in its environment (found by a helper reading the platform as an
 * attacker). What a command needs of svc's configuration is given to it explicitly.
 */
const SECRET_NAME = /TOKEN|SECRET|PASSWORD|PASSWD|KEY|_URL$|_DSN$|CREDENTIAL/i;

export function hostCommandEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    // SVCMASTER_: the older spelling the configuration still reads. Any case: the proxy's admin
    // token is read from lower-case `svc_admin_token` too (config.ts), and reached every child.
    if (/^SVC(MASTER)?_/i.test(name) && SECRET_NAME.test(name)) continue;
    out[name] = value;
  }
  return out;
}

/**
 * What the commands next to a sandbox need of the environment, and nothing else: runsc, QEMU,
 * ip and nft read none of the operator's variables. hostCommandEnv leaves out svc's secrets
 * only, so a host whose node agent ran with the cloud's keys (`AWS_*`, a `GITHUB_TOKEN`) still
 * handed them to runsc's sentry and gofer and to QEMU, the processes a sandbox escape lands in
 * (left open at stop 57, docs/security.md). The locale and time zone keep messages readable;
 * the proxy variables are kept for tools that fetch (none of the node agent's do today).
 */
const ESSENTIAL = /^(PATH|HOME|USER|LOGNAME|SHELL|TERM|TZ|TMPDIR|LANG|LANGUAGE|LC_[A-Z]+|(?:http|https|no)_proxy|(?:HTTP|HTTPS|NO)_PROXY)$/;

export function essentialHostEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) if (ESSENTIAL.test(name)) out[name] = value;
  return out;
}
