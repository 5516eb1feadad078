/** Splits "host:port" (or ":port", or a bare port) into parts for listen(). */
export function parseListen(addr: string, defaultHost = '127.0.0.1'): { host: string; port: number } {
  const m = /^(?:\[?([^\]]*?)\]?:)?(\d+)$/.exec(addr.trim());
  if (!m) throw new Error(`bad listen address: ${addr}`);
  return { host: m[1] || defaultHost, port: Number(m[2]) };
}
