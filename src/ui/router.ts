import { useEffect, useState } from 'preact/hooks';
import { ROOT } from './api.js';

/**
 * A history-API router in a few lines (why not preact-iso or wouter-preact: the console needs only "which
 * row of pages.ts matches the path, with which parameters" and link clicks that do not reload; each of
 * those packages brings more than that, and its own idea of the base path, which here is only known at run
 * time: `/ui/` or a location's `/sjc/ui/`). Paths inside the console are relative to ROOT: `servers/<uuid>`.
 * The query string carries a list page's state (filters, search, page) so a reload or a shared link shows
 * the same thing.
 */

/** The console-relative path of the current page (`servers/abc`), without slashes at either end. */
export function currentPath(): string {
  const p = location.pathname;
  const root = ROOT.pathname;
  return (p.startsWith(root) ? p.slice(root.length) : '').replace(/^\/+|\/+$/g, '');
}

/** The absolute href of a console path (`servers/abc?x=1` → `/ui/servers/abc/?x=1`). */
export function href(path: string): string {
  const [p, q] = path.split('?');
  const clean = p.replace(/^\/+|\/+$/g, '');
  return `${ROOT.pathname}${clean ? `${clean}/` : ''}${q ? `?${q}` : ''}`;
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((fn) => fn()));

/** Goes to a console path without reloading (`replace`: no new history entry, for a list's filters). */
export function navigate(path: string, opts: { replace?: boolean } = {}): void {
  const to = href(path);
  if (to === location.pathname + location.search) return;
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((fn) => fn());
  if (!opts.replace) window.scrollTo(0, 0);
}

/** Re-renders on every navigation; returns `{path, query}`. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const [, setTick] = useState(0);
  useEffect(() => {
    const fn = () => setTick((t) => t + 1);
    listeners.add(fn);
    return () => void listeners.delete(fn);
  }, []);
  return { path: currentPath(), query: new URLSearchParams(location.search) };
}

/** `servers/:uuid` against `servers/abc` → `{uuid: 'abc'}`; no match → null. */
export function matchPath(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/').filter(Boolean);
  const have = path.split('/').filter(Boolean);
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(':')) params[want[i].slice(1)] = decodeURIComponent(have[i]);
    else if (want[i] !== have[i]) return null;
  }
  return params;
}

/** Link clicks inside the console navigate without a reload (a modified click still opens a new tab). */
export function interceptLinks(): void {
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element | null)?.closest?.('a');
    if (!a || a.target || a.hasAttribute('download')) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || !url.pathname.startsWith(ROOT.pathname)) return;
    e.preventDefault();
    navigate(url.pathname.slice(ROOT.pathname.length) + url.search);
  });
}
