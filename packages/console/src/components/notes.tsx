import type { ComponentChildren } from 'preact';

/** A failed call or a refused action: read out by screen readers as it appears. */
export function ErrorNote({ error }: { error: string | undefined }) {
  return error ? <p class="error" role="alert">{error}</p> : null;
}

/** What an action did ("Paused"): a polite live region. */
export function StatusNote({ text }: { text: string | undefined }) {
  return <p class="status" role="status" aria-live="polite">{text ?? ''}</p>;
}

export function Loading({ what }: { what: string }) {
  return <p class="muted" aria-busy="true">Loading {what}…</p>;
}

/** A titled section of a page: a region named by its heading. */
export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  const id = `sec-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return (
    <section aria-labelledby={id} class="card">
      <div class="card-head"><h2 id={id}>{title}</h2>{actions ? <div class="actions">{actions}</div> : null}</div>
      {children}
    </section>
  );
}
