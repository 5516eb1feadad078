/** Everything needed to exec a process, after user, cwd, env and executable are resolved. */
export interface LaunchSpec {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Set only when privileges are dropped by the spawn call itself (no setpriv available). */
  uid?: number;
  gid?: number;
  /** The user's command line, for messages. */
  displayCommand: string;
}
