/**
 * The official e2b SDK, pointed at one `svc up`, drives real sandboxes (gVisor, or microVMs with
 * SVC_RUNTIME=microvm): the cases under e2b-sdk/ (envd.ts: commands, files, PTY and envd's
 * tokens; lifecycle.ts: pause, resume, snapshots and fork; templates.ts: the template builder),
 * registered here in that order so that they share the platform this file starts (a start is
 * the longest part of the run, three times so under TCG). e2b-sdk-harness.ts says which SDK
 * release runs; scripts/test.sh runs this file with two releases and on both runtimes.
 */
import { after, before } from 'node:test';
import { startedPlatform, startSdkPlatform, stopSdkPlatform } from './e2b-sdk-harness.ts';
import { diagnoseFailures } from './harness.ts';

diagnoseFailures(startedPlatform);
before(startSdkPlatform);
after(stopSdkPlatform);

// Imported after the hooks: the cases' tests then run inside them.
await import('./e2b-sdk/envd.ts');
await import('./e2b-sdk/lifecycle.ts');
await import('./e2b-sdk/templates.ts');
