/**
 * Whether a request carrying a cookie credential may come from the page that sent it. The API's CSRF rule
 * (a cookie session's unsafe requests echo the `csrftoken` cookie in `X-CSRFToken`, http/auth/index.ts)
 * relies on a header a page of another site cannot set; a browser's websocket handshake carries no such
 * header, only `Origin`, so for it the page's origin must be the service's own: its host (and port) the
 * one the request addressed (`Host`), or that of `--public-url` (a proxy may rewrite `Host`). Only the host
 * is compared: a proxy that ends TLS makes an https page's handshake arrive as plain http.
 *
 * No `Origin` at all is a client outside a browser (pycloudsigma, curl): nothing to protect there. A
 * malformed one, or `null` (a sandboxed or local page), is refused.
 */
export function allowedOrigin(origin: string | undefined, host: string | undefined, publicUrl: string | null): boolean {
  if (origin === undefined) return true;
  const page = parseHttpUrl(origin);
  if (!page) return false;
  if (publicUrl && parseHttpUrl(publicUrl)?.host === page.host) return true;
  // The Host header spelled as a URL's host: lower case, the scheme's default port dropped.
  return host !== undefined && parseHttpUrl(`${page.protocol}//${host}`)?.host === page.host;
}

function parseHttpUrl(text: string): URL | null {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}
