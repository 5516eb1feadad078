import { useEffect, useState } from 'preact/hooks';
import { errorText } from './api.ts';
import { ErrorBoundary, NotFoundView } from './components/error-boundary.tsx';
import { identify, type Identity } from './identity.ts';
import type { PageProps } from './page-props.ts';
import { href, useRoute } from './router.ts';
import { forgetKey, saveKey, savedKey } from './session.ts';
import { AdminPage } from './pages/admin.tsx';
import { SandboxPage } from './pages/sandbox.tsx';
import { SandboxesPage } from './pages/sandboxes.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { SnapshotsPage } from './pages/snapshots.tsx';
import { TeamPage } from './pages/team.tsx';
import { TemplatePage } from './pages/template.tsx';
import { TemplatesPage } from './pages/templates.tsx';
import { VolumesPage } from './pages/volumes.tsx';


const NAV: { part: string; label: string; admin?: boolean }[] = [
  { part: 'sandboxes', label: 'Sandboxes' },
  { part: 'templates', label: 'Templates' },
  { part: 'snapshots', label: 'Snapshots' },
  { part: 'volumes', label: 'Volumes' },
  { part: 'team', label: 'Team' },
  { part: 'admin', label: 'Admin', admin: true },
];

/** The page a route names; an unknown one is the sandbox list, an unreadable one not found. */
function Page({ id, route }: PageProps) {
  if (route.invalid) return <NotFoundView />;
  const [section, first, sub, second] = route.parts;
  switch (section) {
    case 'sandboxes': return first ? <SandboxPage id={id} route={route} sandboxId={first} /> : <SandboxesPage id={id} route={route} />;
    case 'templates': return first ? <TemplatePage id={id} route={route} templateId={first} buildId={sub === 'builds' ? second : undefined} /> : <TemplatesPage id={id} route={route} />;
    case 'snapshots': return <SnapshotsPage id={id} route={route} />;
    case 'volumes': return <VolumesPage id={id} route={route} />;
    case 'team': return <TeamPage id={id} route={route} />;
    case 'admin': return id.admin ? <AdminPage id={id} route={route} /> : <p role="alert" class="error">The admin pages need the admin API key.</p>;
    default: return <SandboxesPage id={id} route={route} />;
  }
}

export function App() {
  const route = useRoute();
  const [id, setId] = useState<Identity>();
  const [restoring, setRestoring] = useState(() => savedKey() !== undefined);
  const [restoreError, setRestoreError] = useState<string>();
  useEffect(() => {
    const key = savedKey();
    if (!key) return;
    identify(key).then(setId, (err) => { forgetKey(); setRestoreError(errorText(err)); }).finally(() => setRestoring(false));
  }, []);
  if (restoring) return <p class="muted" aria-busy="true">Signing in…</p>;
  if (!id) {
    return (
      <>
        {restoreError ? <p class="error" role="alert">Signed out: {restoreError}</p> : null}
        <SignIn onSignedIn={(who, key) => { saveKey(key); setId(who); }} />
      </>
    );
  }
  const section = route.parts[0] ?? 'sandboxes';
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <a class="brand" href={href('sandboxes')}>svc</a>
        <nav aria-label="Main">
          <ul>
            {NAV.filter((n) => !n.admin || id.admin).map((n) => (
              <li key={n.part}><a href={href(n.part)} aria-current={section === n.part ? 'page' : undefined}>{n.label}</a></li>
            ))}
          </ul>
        </nav>
        <span class="who muted">{id.teamName}{id.admin ? ' (admin)' : ''}</span>
        <button type="button" onClick={() => { forgetKey(); setId(undefined); location.hash = ''; }}>Sign out</button>
      </header>
      <main id="main" tabIndex={-1}>
        <ErrorBoundary>
          <Page id={id} route={route} />
        </ErrorBoundary>
      </main>
    </>
  );
}
