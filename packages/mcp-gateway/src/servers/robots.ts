/**
 * robots.txt as svc's `fetch` server reads it, like the reference server (Protego): the group
 * for the user agent's product token, else `*`; the longest matching Allow or Disallow rule wins,
 * Allow on a tie; `*` and `$` in rules.
 */

interface Rule { allow: boolean; pattern: string }

function matches(pattern: string, path: string): boolean {
  const anchored = pattern.endsWith('$');
  const body = (anchored ? pattern.slice(0, -1) : pattern).split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
  return new RegExp(`^${body}${anchored ? '$' : ''}`).test(path);
}

function groups(text: string): Map<string, Rule[]> {
  const result = new Map<string, Rule[]>();
  let agents: string[] = [];
  let inRules = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*/, '').trim();
    const m = /^([A-Za-z-]+)\s*:\s*(.*)$/.exec(line);
    if (!m) continue;
    const [key, value] = [m[1].toLowerCase(), m[2].trim()];
    if (key === 'user-agent') {
      if (inRules) agents = [];
      inRules = false;
      agents.push(value.toLowerCase());
      for (const a of agents) if (!result.has(a)) result.set(a, []);
    } else if (key === 'allow' || key === 'disallow') {
      inRules = true;
      if (value === '') continue; // "Disallow:" with nothing allows everything
      for (const a of agents) result.get(a)?.push({ allow: key === 'allow', pattern: value });
    }
  }
  return result;
}

export function robotsAllow(robotsTxt: string, url: string, userAgent: string): boolean {
  const all = groups(robotsTxt);
  const product = userAgent.split('/')[0].toLowerCase();
  const agent = [...all.keys()].find((a) => a !== '*' && product.includes(a));
  const rules = all.get(agent ?? '*') ?? [];
  const u = new URL(url);
  let path = u.pathname + u.search;
  try {
    path = decodeURIComponent(u.pathname) + u.search;
  } catch {
    // A malformed escape: match the path as written.
  }
  let best: Rule | undefined;
  for (const rule of rules) {
    if (!matches(rule.pattern, path)) continue;
    if (!best || rule.pattern.length > best.pattern.length || (rule.pattern.length === best.pattern.length && rule.allow)) best = rule;
  }
  return best?.allow ?? true;
}
