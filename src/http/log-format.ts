/**
 * `--log-format pretty`: pino's JSON lines as readable text on a terminal, without another dependency
 * (pino-pretty brings a dozen packages for what is a dozen lines here). Each line: time, level, message,
 * then the other fields as key=value; an error's stack on the lines below; the start banner (the event
 * `start`) as the few lines a person reads to begin.
 */
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const OWN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'v', 'err']);

type LogLine = Record<string, unknown> & { level?: number; time?: number; msg?: string };

export function prettyLine(line: string): string {
  let o: LogLine;
  try {
    o = JSON.parse(line) as LogLine;
  } catch {
    return line;
  }
  if (o.event === 'start') return bannerText(o);
  const time = typeof o.time === 'number' ? new Date(o.time).toISOString().slice(11, 23) : '';
  const level = LEVELS[o.level ?? 30] ?? String(o.level);
  const fields = Object.entries(o)
    .filter(([k]) => !OWN.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' && !/\s/.test(v) ? v : JSON.stringify(v)}`);
  const err = o.err as { stack?: string; message?: string } | undefined;
  const tail = err ? `\n    ${(err.stack ?? err.message ?? '').split('\n').join('\n    ')}` : '';
  return `${time} ${level.padEnd(5)} ${o.msg ?? ''}${fields.length ? `  ${fields.join(' ')}` : ''}${tail}`;
}

/** The start event as a person reads it: where it listens, the demo login, a first request, the admin plane. */
export function bannerText(o: Record<string, unknown>): string {
  const lines = [String(o.msg)];
  // Several locations (src/serve-locations.ts): each one's base URLs.
  const locations = o.locations as Record<string, Record<string, string>> | undefined;
  if (locations) for (const [code, urls] of Object.entries(locations)) lines.push(`Location ${code}: ${Object.values(urls).join('  ')}`);
  const demo = o.demo_login as { email: string; password: string } | null;
  if (demo) lines.push(`Demo login: ${demo.email} / ${demo.password}`, `Try: ${String(o.try)}`);
  if (typeof o.console === 'string') lines.push(`Console: ${o.console}${demo ? ' (sign in with the demo login)' : ''}`);
  if (typeof o.tls === 'string') lines.push(o.tls);
  const admin = o.admin as { url: string; access: string; token: string } | null;
  if (admin) lines.push(`Admin plane: ${admin.url} (${admin.access === 'any' ? 'any client' : 'loopback only'}); token ${admin.token}`);
  return lines.join('\n');
}

/** A pino destination that writes each JSON line as text to `out`. */
export function prettyStream(out: { write(s: string): unknown } = process.stdout): { write(chunk: string): void } {
  let pending = '';
  return {
    write(chunk: string) {
      pending += chunk;
      let end: number;
      while ((end = pending.indexOf('\n')) >= 0) {
        out.write(prettyLine(pending.slice(0, end)) + '\n');
        pending = pending.slice(end + 1);
      }
    },
  };
}
