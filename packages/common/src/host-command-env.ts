/**
 * The environment a host command runs with: the platform's own, without its secrets. The systemd
 * units load the cluster token, admin tokens, database and Redis URLs and S3 keys as `SVC_*`
 * variables (docs/cluster.md), and every child inherited them: runsc's sentry and gofer, QEMU,
 * mmdebstrap, a volume plugin, so whoever broke out of a sandbox into one of those found
 * cluster-wide credentials in its environment (found by a helper reading the platform as an
 * attacker). What a command needs of svc's configuration is given to it explicitly.
 */
const SECRET_NAME = /TOKEN|SECRET|PASSWORD|PASSWD|KEY|_URL$|_DSN$|CREDENTIAL/;

export function hostCommandEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    // SVCMASTER_: the older spelling the configuration still reads.
    if (/^SVC(MASTER)?_/.test(name) && SECRET_NAME.test(name)) continue;
    out[name] = value;
  }
  return out;
}
