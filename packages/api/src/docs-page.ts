/**
 * GET /docs: the public OpenAPI document as one self-contained HTML page (no scripts, nothing
 * fetched from elsewhere), so an operator can read the API in a browser on a machine without
 * internet access. Rendered once from the document at start.
 */
import { PUBLIC_API } from '@svc/contracts';
import { dereference, type Operation } from '@svc/contracts/route-schemas';

const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
const schemaBlock = (schema: object) => `<pre>${escape(JSON.stringify(dereference(schema), null, 2))}</pre>`;
const anchor = (method: string, path: string) => `${method}-${path}`.replace(/[^A-Za-z0-9]+/g, '-');

function operationHtml(method: string, path: string, op: Operation): string {
  const params = (op.parameters ?? []).map((p) =>
    `<tr><td><code>${escape(p.name)}</code></td><td>${p.in}</td><td>${p.required ? 'yes' : ''}</td><td><code>${escape(JSON.stringify(p.schema))}</code></td><td>${escape(p.description ?? '')}</td></tr>`).join('');
  const body = op.requestBody?.content['application/json']?.schema;
  const answers = Object.entries(op.responses).map(([status, r]) => {
    const s = r.content?.['application/json']?.schema;
    return `<li><b>${status}</b> ${escape(r.description)}${s ? `<details><summary>body</summary>${schemaBlock(s)}</details>` : ''}</li>`;
  }).join('');
  return `<section id="${anchor(method, path)}"><h3><span class="m">${method.toUpperCase()}</span> <code>${escape(path)}</code></h3>`
    + `<p>${escape(op.summary ?? '')}</p>`
    + (params ? `<table><tr><th>parameter</th><th>in</th><th>required</th><th>schema</th><th></th></tr>${params}</table>` : '')
    + (body ? `<details open><summary>request body${op.requestBody?.required ? '' : ' (optional)'}</summary>${schemaBlock(body)}</details>` : '')
    + `<ul>${answers}</ul></section>`;
}

export function renderDocsPage(): string {
  const ops: string[] = [];
  const index: string[] = [];
  for (const [path, item] of Object.entries(PUBLIC_API.paths)) {
    for (const [method, op] of Object.entries(item as Record<string, Operation>)) {
      index.push(`<li><a href="#${anchor(method, path)}"><span class="m">${method.toUpperCase()}</span> ${escape(path)}</a> ${escape(op.summary ?? '')}</li>`);
      ops.push(operationHtml(method, path, op));
    }
  }
  const { title, version, description } = PUBLIC_API.info;
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title><style>
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
code,pre{font:13px ui-monospace,monospace}pre{background:#f5f5f5;padding:.6rem;overflow:auto}
.m{display:inline-block;min-width:4.5rem;font-weight:700}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
section{border-top:1px solid #ccc;margin-top:1.5rem}</style></head><body>
<h1>${escape(title)} <small>${escape(version)}</small></h1><p>${escape(description)}</p>
<p>The machine-readable document: <a href="/openapi.json">/openapi.json</a>.</p><ul>${index.join('')}</ul>${ops.join('')}</body></html>`;
}
