import type { StateFilter } from './sandbox-list-data.ts';

/** What the reader typed and chose; the page applies it (the text fields after a pause in typing). */
export interface FilterValues {
  state: StateFilter;
  template: string;
  metadata: string;
  perPage: number;
}

export const PER_PAGE = [25, 100, 1000] as const;
const STATES: Array<[StateFilter, string]> = [['all', 'All'], ['running', 'Running'], ['paused', 'Paused'], ['ended', 'Ended']];

export function isStateFilter(s: string | null): s is StateFilter {
  return STATES.some(([v]) => v === s);
}

/** The sandbox list's filters: a search form whose every change applies itself (no submit button). */
export function SandboxFilters({ value, onChange, metadataError }: {
  value: FilterValues;
  onChange: (next: FilterValues) => void;
  metadataError: string | undefined;
}) {
  const set = <K extends keyof FilterValues>(k: K, v: FilterValues[K]) => onChange({ ...value, [k]: v });
  return (
    <form role="search" aria-label="Filter sandboxes" class="row sandbox-filters" onSubmit={(e) => e.preventDefault()}>
      <div class="field">
        <label for="sbx-state">State</label>
        <select id="sbx-state" value={value.state} onChange={(e) => set('state', e.currentTarget.value as StateFilter)}>
          {STATES.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
        </select>
      </div>
      <div class="field">
        <label for="sbx-template">Template</label>
        <input id="sbx-template" type="search" value={value.template} placeholder="id or alias" autoComplete="off"
          onInput={(e) => set('template', e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="sbx-metadata">Metadata</label>
        <input id="sbx-metadata" type="search" value={value.metadata} placeholder="key=value & key2=value2" autoComplete="off"
          aria-invalid={metadataError ? true : undefined} aria-describedby={metadataError ? 'sbx-metadata-error' : undefined}
          onInput={(e) => set('metadata', e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="sbx-per-page">Per page</label>
        <select id="sbx-per-page" value={String(value.perPage)} onChange={(e) => set('perPage', Number(e.currentTarget.value))}>
          {PER_PAGE.map((n) => <option key={n} value={String(n)}>{n}</option>)}
        </select>
      </div>
      {metadataError ? <p id="sbx-metadata-error" class="error" role="alert">{metadataError}</p> : null}
    </form>
  );
}
