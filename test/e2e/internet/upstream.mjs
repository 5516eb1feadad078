// "The internet" of the egress tests: HTTPS on 443, HTTP on 80 and plain HTTP on 8081, run inside
// a network namespace of the test's own. Every request and connection is one JSON line on stdout;
// answers never repeat the request's headers (a secret injected on the way must not come back).
// argv: a JSON file {certs: {name: {cert, key}}, defaultName}.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

const conf = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const contexts = Object.fromEntries(Object.entries(conf.certs).map(([name, c]) => [name, tls.createSecureContext({ cert: c.cert, key: c.key })]));
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

function handler(scheme) {
  return (req, res) => {
    let bytes = 0;
    req.on('data', (d) => { bytes += d.length; });
    req.on('end', () => {
      say({ event: 'request', scheme, method: req.method, path: req.url, host: req.headers.host, headers: req.headers, bytes, servername: req.socket.servername ?? null, remote: req.socket.remoteAddress });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true, scheme, method: req.method, path: req.url, host: req.headers.host, authorized: !!req.headers.authorization || !!req.headers['x-api-key'] }));
    });
  };
}

const servers = [
  https.createServer({ ...conf.certs[conf.defaultName], SNICallback: (name, cb) => cb(null, contexts[name] ?? contexts[conf.defaultName]) }, handler('https')).listen(443, '0.0.0.0'),
  http.createServer(handler('http')).listen(80, '0.0.0.0'),
  http.createServer(handler('http-8081')).listen(8081, '0.0.0.0'),
];
for (const s of servers) s.on('connection', () => say({ event: 'connection' }));
Promise.all(servers.map((s) => new Promise((r) => s.listening ? r() : s.on('listening', r)))).then(() => say({ event: 'ready' }));
process.on('SIGTERM', () => process.exit(0));
