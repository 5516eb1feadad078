import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findOriginalDestination } from './original-destination.ts';

const PROC = [
  'ipv4     2 tcp      6 431999 ESTABLISHED src=10.11.0.2 dst=93.184.216.34 sport=45678 dport=443 src=10.11.0.1 dst=10.11.0.2 sport=8443 dport=45678 [ASSURED] mark=0 zone=0 use=2',
  'ipv4     2 tcp      6 119 TIME_WAIT src=10.11.0.2 dst=1.1.1.1 sport=45679 dport=443 src=10.11.0.1 dst=10.11.0.2 sport=8443 dport=45679 [ASSURED] mark=0 zone=0 use=2',
  'ipv4     2 tcp      6 431999 ESTABLISHED src=10.11.0.2 dst=8.8.8.8 sport=45679 dport=8443 src=10.11.0.1 dst=10.11.0.2 sport=8443 dport=45679 [ASSURED] mark=0 zone=0 use=2',
  'ipv4     2 udp      17 29 src=10.11.0.2 dst=10.0.0.53 sport=40000 dport=53 src=10.0.0.53 dst=10.11.0.2 sport=53 dport=40000 mark=0 zone=0 use=2',
].join('\n');

const CONNTRACK_TOOL = 'tcp      6 431999 ESTABLISHED src=10.11.0.3 dst=140.82.112.3 sport=51000 dport=443 src=10.11.0.1 dst=10.11.0.3 sport=8443 dport=51000 [ASSURED] mark=0 use=1\n'
  + 'conntrack v1.4.7 (conntrack-tools): 1 flow entries have been shown.\n';

test('the original tuple of the client\'s connection: its dst and dport', () => {
  assert.deepEqual(findOriginalDestination(PROC, '10.11.0.2', 45678), { ip: '93.184.216.34', port: 443 });
});

test('an earlier connection from a reused port (TIME_WAIT) is passed over', () => {
  assert.deepEqual(findOriginalDestination(PROC, '10.11.0.2', 45679), { ip: '8.8.8.8', port: 8443 });
});

test('the reply tuple and UDP never match; unknown connections are undefined', () => {
  assert.equal(findOriginalDestination(PROC, '10.11.0.1', 8443), undefined);
  assert.equal(findOriginalDestination(PROC, '10.11.0.2', 40000), undefined);
  assert.equal(findOriginalDestination(PROC, '10.11.0.2', 1), undefined);
  assert.equal(findOriginalDestination('', '10.11.0.2', 45678), undefined);
});

test('conntrack -L output has the same tuples', () => {
  assert.deepEqual(findOriginalDestination(CONNTRACK_TOOL, '10.11.0.3', 51000), { ip: '140.82.112.3', port: 443 });
});
