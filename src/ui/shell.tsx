import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { accountAction, onUnauthorized, whoAmI } from './api.js';
import { liveState, onLiveState, startLive, stopLive, type LiveState } from './live.js';
import { PAGES, type PageRow } from './pages.js';
import { ErrorBox } from './parts/errors.js';
import { forgetNames } from './parts/names.js';
import { href, matchPath, navigate, useLocation } from './router.js';
import { SessionContext, type Session } from './session.js';
import css from './shell.module.css';

function route(path: string): { row: PageRow; params: Record<string, string> } | null {
  for (const row of PAGES) {
    const params = matchPath(row.path, path);
    if (params) return { row, params };
  }
  return null;
}

/** The navigation from pages.ts: rows with a `nav` label, grouped by `group` in the order they come. */
function Nav({ path, onPick }: { path: string; onPick: () => void }) {
  const groups = new Map<string, PageRow[]>();
  for (const row of PAGES) if (row.nav) groups.set(row.group ?? '', [...(groups.get(row.group ?? '') ?? []), row]);
  const top = path.split('/')[0];
  return (
    <>
      {[...groups].map(([group, rows]) => (
        <div key={group} class={css.group}>
          {group ? <h2 class={css.groupTitle}>{group}</h2> : null}
          <ul>
            {rows.map((r) => (
              <li key={r.path}>
                <a href={href(r.path)} aria-current={r.path === top ? 'page' : undefined} onClick={onPick}>
                  {r.nav}
                </a>
              </li>
            ))}
          </ul>
        </div>
      ))}
    </>
  );
}

const LIVE_TEXT: Record<LiveState, string> = { off: 'not live', connecting: 'connecting…', live: 'live', retrying: 'reconnecting…' };

/**
 * The page around every page: a skip link, a header (banner) with the live indicator and sign-out, the
 * navigation, and the main region with the page that matches the path. Until the API says who is signed in
 * (check_login), nothing shows; without a session only the public pages (sign-in, sign-up, reset) do.
 */
export function Shell() {
  const { path, query } = useLocation();
  const [me, setMe] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [live, setLive] = useState<LiveState>(liveState());
  const [menu, setMenu] = useState(false);

  useEffect(() => {
    whoAmI().then(setMe, (e) => (setError(e), setMe(null)));
    const offLive = onLiveState(setLive);
    const offAuth = onUnauthorized(() => setMe(null));
    return () => {
      offLive();
      offAuth();
    };
  }, []);

  useEffect(() => {
    forgetNames();
    if (me) startLive(() => setMe(null));
    else if (me === null) stopLive();
  }, [me]);

  const session: Session = {
    me: me ?? null,
    signedIn: (uuid) => setMe(uuid),
    signOut: async () => {
      try {
        await accountAction('logout');
      } finally {
        stopLive();
        setMe(null);
        navigate('signin');
      }
    },
  };

  const found = route(path);
  useEffect(() => {
    const title = found?.row.nav ?? (found ? path.split('/')[0] : 'Not found');
    document.title = `${title || 'Overview'} · Stratus console`;
  }, [path]);

  if (me === undefined) return <p aria-busy="true">Loading the console…</p>;
  // Operator pages ask for the admin token themselves: an operator needs no account to use them.
  const needsSession = !found || !(found.row.public || found.row.operator);
  if (needsSession && !me && path !== 'signin') {
    queueMicrotask(() => navigate('signin', { replace: true }));
    return null;
  }

  return (
    <SessionContext.Provider value={session}>
      <a class={css.skip} href="#main">
        Skip to content
      </a>
      <header class={css.header}>
        <a class={css.brand} href={href('')}>
          Stratus
        </a>
        {me ? (
          <>
            <button type="button" class={css.menu} aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>
              Menu
            </button>
            <span class={css.live} role="status" aria-label="Live updates">
              <span class={live === 'live' ? css.dotOn : css.dotOff} aria-hidden="true" />
              {LIVE_TEXT[live]}
            </span>
            <button type="button" class={css.signout} onClick={() => void session.signOut()}>
              Sign out
            </button>
          </>
        ) : null}
      </header>
      <div class={me ? css.body : css.bodyPublic}>
        {me ? (
          <nav id="nav" aria-label="Main" class={menu ? css.navOpen : css.nav}>
            <Nav path={path} onPick={() => setMenu(false)} />
          </nav>
        ) : null}
        <main id="main" tabIndex={-1} class={css.main}>
          <ErrorBox error={error} />
          {found ? (
            h(found.row.page, { params: found.params, query, key: path })
          ) : (
            <section>
              <h1>Not found</h1>
              <p>
                The console has no page at {path}. <a href={href('')}>Go to the overview</a>.
              </p>
            </section>
          )}
        </main>
      </div>
    </SessionContext.Provider>
  );
}
