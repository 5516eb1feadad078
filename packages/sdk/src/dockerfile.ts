/**
 * A Dockerfile as the steps of E2B's template builder (docs/templates.md, "The builder"), mapped
 * the way E2B's `Template().fromDockerfile()` and `e2b template create` map one: USER root and
 * WORKDIR / first; FROM the base (one stage only); RUN, COPY and ADD of local files (--chown),
 * WORKDIR, USER, ENV and ARG (as environment); CMD or ENTRYPOINT as the start command with a
 * 20-second wait; EXPOSE and VOLUME ignored; then USER user and WORKDIR /home/user unless the
 * file set them.
 */
import { InvalidArgumentError } from './errors.ts';

export interface BuildStep {
  type: 'RUN' | 'COPY' | 'ENV' | 'WORKDIR' | 'USER';
  args: string[];
}

export interface BuildPlan {
  fromImage: string;
  steps: BuildStep[];
  startCmd?: string;
  readyCmd?: string;
  /** Instructions that were skipped, for a warning. */
  ignored: string[];
}

const START_WAIT = 'sleep 20';

export function planFromDockerfile(text: string): BuildPlan {
  const instructions = logicalLines(text).map((line) => {
    const m = /^(\S+)\s*(.*)$/s.exec(line)!;
    return { keyword: m[1]!.toUpperCase(), rest: m[2]!.trim() };
  });
  const froms = instructions.filter((i) => i.keyword === 'FROM');
  if (froms.length === 0) throw new InvalidArgumentError('the Dockerfile has no FROM instruction');
  if (froms.length > 1) throw new InvalidArgumentError('multi-stage Dockerfiles (more than one FROM) are not supported');
  const plan: BuildPlan = { fromImage: '', steps: [{ type: 'USER', args: ['root'] }, { type: 'WORKDIR', args: ['/'] }], ignored: [] };
  let userSet = false;
  let workdirSet = false;
  for (const { keyword, rest } of instructions) {
    switch (keyword) {
      case 'FROM': {
        const [image, as] = rest.split(/\s+/);
        if (!image || (as && as.toUpperCase() !== 'AS')) throw new InvalidArgumentError(`FROM ${rest}: expected an image, optionally AS a name`);
        plan.fromImage = image;
        break;
      }
      case 'RUN': plan.steps.push({ type: 'RUN', args: [commandOf(rest)] }); break;
      case 'COPY':
      case 'ADD': plan.steps.push(...copySteps(keyword, rest)); break;
      case 'WORKDIR': plan.steps.push({ type: 'WORKDIR', args: [rest] }); workdirSet = true; break;
      case 'USER': plan.steps.push({ type: 'USER', args: [rest.split(':')[0]!] }); userSet = true; break;
      case 'ENV':
      case 'ARG': {
        const pairs = envPairs(keyword, rest);
        if (pairs.length) plan.steps.push({ type: 'ENV', args: pairs.flat() });
        break;
      }
      case 'CMD':
      case 'ENTRYPOINT': plan.startCmd = commandOf(rest); plan.readyCmd = START_WAIT; break;
      case 'EXPOSE':
      case 'VOLUME': break;
      default: plan.ignored.push(keyword);
    }
  }
  if (!userSet) plan.steps.push({ type: 'USER', args: ['user'] });
  if (!workdirSet) plan.steps.push({ type: 'WORKDIR', args: ['/home/user'] });
  return plan;
}

/** Lines with their continuations joined, without comments, blank lines or parser directives. */
function logicalLines(text: string): string[] {
  const out: string[] = [];
  let current = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!current && (line === '' || line.startsWith('#'))) continue;
    if (current && line.startsWith('#')) continue;
    if (line.endsWith('\\')) { current += `${line.slice(0, -1)} `; continue; }
    current += line;
    if (current.trim()) out.push(current.trim());
    current = '';
  }
  if (current.trim()) out.push(current.trim());
  return out;
}

/** A shell-form command as it is; an exec-form JSON array joined with spaces (as E2B does). */
function commandOf(rest: string): string {
  if (rest.startsWith('[')) {
    try {
      const parts = JSON.parse(rest) as unknown;
      if (Array.isArray(parts) && parts.every((p) => typeof p === 'string')) return parts.join(' ');
    } catch {
      // not JSON: the shell form, as Docker reads it
    }
  }
  return rest;
}

function copySteps(keyword: string, rest: string): BuildStep[] {
  const words = rest.startsWith('[') ? (JSON.parse(rest) as string[]) : rest.split(/\s+/);
  let owner = '';
  const paths: string[] = [];
  for (const w of words) {
    const flag = /^--([a-z-]+)(?:=(.*))?$/.exec(w);
    if (!flag) { paths.push(w); continue; }
    if (flag[1] === 'chown') owner = flag[2] ?? '';
    else if (flag[1] === 'from') throw new InvalidArgumentError(`${keyword} --from: multi-stage copies are not supported`);
    // --chmod, --link and the like: nothing to do here
  }
  if (paths.length < 2) throw new InvalidArgumentError(`${keyword} ${rest}: expected a source and a destination`);
  const dest = paths.pop()!;
  return paths.map((src) => {
    if (/^[a-z]+:\/\//i.test(src)) throw new InvalidArgumentError(`${keyword} ${src}: only files of the build context can be copied`);
    return { type: 'COPY' as const, args: [src, dest, owner, ''] };
  });
}

/** `ENV a=1 b=2`, `ENV a 1`, `ARG a=1`, `ARG a` (empty). */
function envPairs(keyword: string, rest: string): Array<[string, string]> {
  const words = rest.match(/(?:[^\s"']+|"[^"]*"|'[^']*')+/g) ?? [];
  const unquote = (v: string) => v.replace(/^"(.*)"$/s, '$1').replace(/^'(.*)'$/s, '$1');
  if (keyword === 'ENV' && words.length >= 2 && !words[0]!.includes('=')) {
    return [[words[0]!, unquote(rest.slice(words[0]!.length).trim())]];
  }
  const pairs: Array<[string, string]> = [];
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq > 0) pairs.push([w.slice(0, eq), unquote(w.slice(eq + 1))]);
    else if (keyword === 'ARG') pairs.push([w, '']);
  }
  return pairs;
}
