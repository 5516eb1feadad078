// A stand-in for envd in tests (used until packages/envd has a main.ts): GET /health → 204,
// POST /init (envVars, accessToken), GET /envs (the environment processes would get).
import http from 'node:http';

let token = process.env.SVC_ENVD_ACCESS_TOKEN || undefined;
let initEnv = {};
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ENVD_') && !k.startsWith('SVC_ENVD_')));

http.createServer((req, res) => {
  const authorized = !token || req.headers['x-access-token'] === token;
  if (req.method === 'GET' && req.url === '/health') { res.statusCode = 204; return res.end(); }
  if (req.method === 'POST' && req.url === '/init') {
    let body = '';
    req.on('data', (d) => { body += d; }).on('end', () => {
      if (token && !authorized) { res.statusCode = 401; return res.end(); }
      const b = JSON.parse(body || '{}');
      if (b.envVars) initEnv = b.envVars;
      if (b.accessToken) token = b.accessToken;
      res.statusCode = 204;
      res.end();
    });
    return;
  }
  if (req.method === 'GET' && req.url === '/envs') {
    if (!authorized) { res.statusCode = 401; return res.end(); }
    res.setHeader('content-type', 'application/json');
    return res.end(JSON.stringify({ ...baseEnv, ...initEnv }));
  }
  res.statusCode = 404;
  res.end();
}).listen(49983, '0.0.0.0');
