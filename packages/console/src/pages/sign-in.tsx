import { useState } from 'preact/hooks';
import { errorText } from '../api.ts';
import { identify, type Identity } from '../identity.ts';

/** The sign-in form: the key is checked against the API before anything else is shown. */
export function SignIn({ onSignedIn }: { onSignedIn: (id: Identity, key: string) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) { setError('Enter an API key.'); return; }
    setBusy(true);
    setError(undefined);
    try {
      onSignedIn(await identify(k), k);
    } catch (err) {
      setError(/\b401\b/.test(errorText(err)) ? `That API key was refused: ${errorText(err)}` : errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>svc console</h1>
      <form onSubmit={submit} class="card">
        <label for="api-key">API key</label>
        <input id="api-key" name="api-key" type="password" autoComplete="off" spellcheck={false} value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} aria-describedby="api-key-help" />
        <p id="api-key-help" class="muted">The key `svc up` printed, or one of your team's. It is kept for this browser session only.</p>
        <button type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
        {error ? <p class="error" role="alert">{error}</p> : null}
      </form>
    </main>
  );
}
