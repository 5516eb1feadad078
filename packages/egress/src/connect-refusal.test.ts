import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EgressRule } from '@svc/contracts/egress';
import { connectRefusal } from './connect-refusal.ts';

const deny = (name: string, match: EgressRule['match']): EgressRule => ({ name, match, action: { allow: false } });

test('a CONNECT refused by a deny rule names its host and port, the rule, and why the rule holds for the whole tunnel', () => {
  assert.equal(connectRefusal(deny('2', { host: 'api.test' }), 'host', 'api.test', 443), 'CONNECT api.test:443 refused: deny rule 2 names this host');
  assert.equal(
    connectRefusal(deny('2', { host: 'api.test', path: '/admin*', method: ['DELETE', 'PUT'] }), 'host', 'api.test', 443),
    'CONNECT api.test:443 refused: deny rule 2 names this host, and a tunnel carries any path and method (the rule\'s path /admin*; method DELETE, PUT cannot be checked inside it)',
  );
  assert.equal(
    connectRefusal(deny('no-sni', { host: '*.api.test', sni: 'evil.test' }), 'host', 'x.api.test', 8443),
    'CONNECT x.api.test:8443 refused: deny rule no-sni names this host, and a tunnel carries any SNI, path and method (the rule\'s sni evil.test cannot be checked inside it)',
  );
  assert.equal(
    connectRefusal(deny('evil', { sni: 'evil.test', method: ['POST'] }), 'sni', 'evil.test', 443),
    'CONNECT evil.test:443 refused: deny rule evil names this host as its SNI (the proxy takes a CONNECT\'s host for the tunnel\'s SNI, which it cannot see), and a tunnel carries any path and method (the rule\'s method POST cannot be checked inside it)',
  );
  assert.equal(
    connectRefusal(deny('tunnels', { host: 'api.test', method: ['CONNECT'] }), 'host', 'api.test', 443),
    'CONNECT api.test:443 refused: deny rule tunnels names this host',
    'CONNECT is what matched, not something inside the tunnel',
  );
  assert.equal(
    connectRefusal(deny('none', { scheme: 'https', port: 443 }), 'as_sent', 'any.test', 443),
    'CONNECT any.test:443 refused: deny rule none names no host or SNI, and holds for the CONNECT itself (method CONNECT, empty path)',
  );
});
