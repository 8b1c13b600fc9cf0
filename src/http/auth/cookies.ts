/**
 * The two cookies of a browser session, read and written by hand rather than with @fastify/cookie:
 * we read two names from one header and write two fixed shapes, which is a dozen lines; the plugin
 * would add an onRequest hook to every route (the hot path of every API call, cookie or not) and a
 * dependency whose current `cookie` release asks for Node 22.
 */

/** The value of one cookie from a `Cookie` header (first occurrence), or null. Values are not decoded. */
export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    return value;
  }
  return null;
}

/** A `Set-Cookie` value; `maxAgeS` 0 deletes the cookie. */
export function setCookie(name: string, value: string, opts: { maxAgeS: number; now: Date; httpOnly?: boolean; secure?: boolean }): string {
  const expires = new Date(opts.maxAgeS > 0 ? opts.now.getTime() + opts.maxAgeS * 1000 : 0).toUTCString();
  return (
    `${name}=${value}; expires=${expires}; Max-Age=${opts.maxAgeS}; Path=/; SameSite=Lax` +
    (opts.httpOnly ? '; HttpOnly' : '') +
    (opts.secure ? '; Secure' : '')
  );
}
