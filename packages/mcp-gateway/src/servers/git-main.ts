/** `git.mjs [PATH...]`: svc's git server on stdio (the gateway starts it); repositories under the PATHs only, when given. */
import { createGitServer } from './git.ts';
import { resolveRoots } from './git-repo.ts';
import { serveStdio } from './stdio.ts';

await serveStdio(createGitServer(await resolveRoots(process.argv.slice(2))), 'git');
