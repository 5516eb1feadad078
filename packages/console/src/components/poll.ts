import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { errorText } from '../api.ts';

export interface Polled<T> {
  data: T | undefined;
  error: string | undefined;
  loading: boolean;
  /** Loads again now (after an action), without waiting for the next tick. */
  reload: () => void;
}

/**
 * Loads with `load` now and then every `everyMs` while the page is visible (a hidden tab asks
 * nothing); `deps` change: loads again at once. An answer that comes after a newer one started is
 * dropped, so a slow call never overwrites a fresher view.
 */
export function usePoll<T>(load: () => Promise<T>, everyMs: number | undefined, deps: unknown[]): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const run = useCallback(() => {
    const mine = ++seq.current;
    loadRef.current().then(
      (d) => { if (mine === seq.current) { setData(d); setError(undefined); setLoading(false); } },
      (err) => { if (mine === seq.current) { setError(errorText(err)); setLoading(false); } },
    );
  }, []);
  useEffect(() => {
    setLoading(true);
    run();
    if (!everyMs) return undefined;
    const timer = setInterval(() => { if (document.visibilityState === 'visible') run(); }, everyMs);
    return () => { clearInterval(timer); seq.current++; };
    // deps: the caller names what the load depends on (load itself changes every render).
  }, deps);
  return { data, error, loading, reload: run };
}
