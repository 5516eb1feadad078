/**
 * Static `import` declarations in a JavaScript cell, which a REPL cannot run, as dynamic imports:
 * `import fs, { readFileSync as read } from 'fs'` becomes
 * `var { default: fs, readFileSync: read } = await import('fs');`. The names stay in the context
 * for later cells as an import's would, and `var` lets a cell that imports again run again.
 * Only declarations that start a line are rewritten (the notebook style); `import()` calls and
 * `import.meta` are left alone.
 */
const DECLARATION = /^([ \t]*)import\s+(?!\()(?!\.)(?:([\w$]+)\s*,?\s*)?(?:\*\s*as\s+([\w$]+)|\{([^}]*)\})?\s*(?:from\s*)?(['"])([^'"\n]+)\5[ \t]*;?/gm;

export function rewriteImports(code: string): string {
  return code.replace(DECLARATION, (whole, indent: string, defaultName?: string, namespace?: string, named?: string, _quote?: string, specifier?: string) => {
    const source = `await import(${JSON.stringify(specifier)})`;
    if (!defaultName && !namespace && named === undefined) return `${indent}${source};`;
    const statements: string[] = [];
    if (namespace) statements.push(`var ${namespace} = ${source};`);
    const fields: string[] = [];
    if (defaultName) fields.push(`default: ${defaultName}`);
    for (const part of (named ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
      if (/^type\s/.test(part)) continue; // a TypeScript type-only name
      const [name, alias] = part.split(/\s+as\s+/);
      fields.push(alias ? `${quoteKey(name)}: ${alias}` : name);
    }
    if (fields.length) statements.push(`var { ${fields.join(', ')} } = ${namespace ?? source};`);
    return statements.length ? indent + statements.join(' ') : whole;
  });
}

function quoteKey(name: string): string {
  return /^[\w$]+$/.test(name) ? name : JSON.stringify(name.replace(/^['"]|['"]$/g, ''));
}
