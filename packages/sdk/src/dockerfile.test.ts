import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planFromDockerfile } from './dockerfile.ts';

test('a Dockerfile becomes the builder\'s steps the way E2B maps one', () => {
  const plan = planFromDockerfile(`
# syntax comments and blank lines are skipped

FROM registry.local:5000/team/app:1 AS build
ARG VERSION=1.2 EMPTY
ENV A=1 B="two words"
ENV PLAIN some value
RUN apt-get update && \\
    apt-get install -y curl
RUN ["/bin/sh", "-c", "echo exec form"]
COPY --chown=user:user app/ /srv/app/
ADD a.txt b.txt /opt/
WORKDIR /srv/app
EXPOSE 8000
HEALTHCHECK CMD true
CMD ["python3", "-m", "http.server"]
`);
  assert.equal(plan.fromImage, 'registry.local:5000/team/app:1');
  assert.deepEqual(plan.steps, [
    { type: 'USER', args: ['root'] },
    { type: 'WORKDIR', args: ['/'] },
    { type: 'ENV', args: ['VERSION', '1.2', 'EMPTY', ''] },
    { type: 'ENV', args: ['A', '1', 'B', 'two words'] },
    { type: 'ENV', args: ['PLAIN', 'some value'] },
    { type: 'RUN', args: ['apt-get update &&  apt-get install -y curl'] },
    { type: 'RUN', args: ['/bin/sh -c echo exec form'] },
    { type: 'COPY', args: ['app/', '/srv/app/', 'user:user', ''] },
    { type: 'COPY', args: ['a.txt', '/opt/', '', ''] },
    { type: 'COPY', args: ['b.txt', '/opt/', '', ''] },
    { type: 'WORKDIR', args: ['/srv/app'] },
    { type: 'USER', args: ['user'] },
  ], 'root and / first; USER user at the end when the file set none, no WORKDIR when it set one');
  assert.equal(plan.startCmd, 'python3 -m http.server');
  assert.equal(plan.readyCmd, 'sleep 20');
  assert.deepEqual(plan.ignored, ['HEALTHCHECK']);
});

test('what the builder cannot take is refused with a reason', () => {
  assert.throws(() => planFromDockerfile('RUN true'), /no FROM/);
  assert.throws(() => planFromDockerfile('FROM a AS b\nFROM c\n'), /multi-stage/);
  assert.throws(() => planFromDockerfile('FROM a\nCOPY --from=b /x /y\n'), /--from/);
  assert.throws(() => planFromDockerfile('FROM a\nADD https://example.test/x /y\n'), /build context/);
  assert.throws(() => planFromDockerfile('FROM a\nCOPY onlyone\n'), /source and a destination/);
  const plain = planFromDockerfile('FROM e2bdev/base\nUSER app\n');
  assert.deepEqual(plain.steps.slice(-2), [{ type: 'USER', args: ['app'] }, { type: 'WORKDIR', args: ['/home/user'] }]);
});
