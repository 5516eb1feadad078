import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EMPTY_SHA256, presignUrl, signRequest } from './sigv4.ts';

// AWS's published vectors: the SigV4 test suite (get-vanilla, get-vanilla-query-order-key-case,
// post-vanilla) and the Amazon S3 API reference examples (header signing and presigned URL).
const suite = {
  credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
  region: 'us-east-1', service: 'service', now: new Date('2015-08-30T12:36:00Z'),
};
const s3 = {
  credentials: { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' },
  region: 'us-east-1', service: 's3', now: new Date('2013-05-24T00:00:00Z'),
};

test('sigv4 test suite: get-vanilla', () => {
  const r = signRequest({ ...suite, method: 'GET', url: 'https://example.amazonaws.com/', payloadHash: EMPTY_SHA256 });
  assert.equal(r.headers.authorization,
    'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31');
  assert.equal(r.headers['x-amz-date'], '20150830T123600Z');
});

test('sigv4 test suite: get-vanilla-query-order-key-case', () => {
  const r = signRequest({ ...suite, method: 'GET', url: 'https://example.amazonaws.com/?Param2=value2&Param1=value1', payloadHash: EMPTY_SHA256 });
  assert.equal(r.signature, 'b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500');
});

test('sigv4 test suite: post-vanilla', () => {
  const r = signRequest({ ...suite, method: 'POST', url: 'https://example.amazonaws.com/', payloadHash: EMPTY_SHA256 });
  assert.equal(r.signature, '5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b');
});

test('S3 example: GET object with a range', () => {
  const r = signRequest({ ...s3, method: 'GET', url: 'https://examplebucket.s3.amazonaws.com/test.txt', headers: { Range: 'bytes=0-9' }, payloadHash: EMPTY_SHA256 });
  assert.equal(r.headers.authorization,
    'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41');
});

test('S3 example: PUT object with a special character in the key', () => {
  const r = signRequest({
    ...s3, method: 'PUT', url: 'https://examplebucket.s3.amazonaws.com/test$file.text',
    headers: { Date: 'Fri, 24 May 2013 00:00:00 GMT', 'x-amz-storage-class': 'REDUCED_REDUNDANCY' },
    payloadHash: '44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072',
  });
  assert.equal(r.signature, '98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd');
});

test('S3 example: GET bucket lifecycle (valueless query parameter)', () => {
  const r = signRequest({ ...s3, method: 'GET', url: 'https://examplebucket.s3.amazonaws.com/?lifecycle', payloadHash: EMPTY_SHA256 });
  assert.equal(r.signature, 'fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543');
});

test('S3 example: list objects (sorted query)', () => {
  const r = signRequest({ ...s3, method: 'GET', url: 'https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J', payloadHash: EMPTY_SHA256 });
  assert.equal(r.signature, '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7');
});

test('S3 example: presigned GET URL', () => {
  const url = presignUrl({ ...s3, method: 'GET', url: 'https://examplebucket.s3.amazonaws.com/test.txt', expiresSec: 86400 });
  assert.equal(url,
    'https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404');
});

test('session tokens are signed into requests and presigned URLs', () => {
  const credentials = { ...s3.credentials, sessionToken: 'tok/en+=' };
  const r = signRequest({ ...s3, credentials, method: 'GET', url: 'https://b.example/k', payloadHash: EMPTY_SHA256 });
  assert.equal(r.headers['x-amz-security-token'], 'tok/en+=');
  assert.match(r.headers.authorization, /SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,/);
  const url = new URL(presignUrl({ ...s3, credentials, method: 'GET', url: 'https://b.example/k', expiresSec: 60 }));
  assert.equal(url.searchParams.get('X-Amz-Security-Token'), 'tok/en+=');
});
