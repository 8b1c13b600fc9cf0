/**
 * The profile's clone naming strategy (reference §11), applied when a clone is given no name:
 * NONE keeps the name; COUNTER appends `_1` or increments a trailing `_N`; DATE appends or updates
 * `-YYYY-MM-DD`; TIMESTAMP appends or updates `-YYYY-MM-DD HH:MM:SS`. When the trailing date or
 * timestamp is already current, the strategy falls back to COUNTER without stripping it. COUNTER skips
 * numbers already used by the owner's drives, so a deleted drive's name becomes free again.
 */
export type CloneNaming = 'NONE' | 'COUNTER' | 'DATE' | 'TIMESTAMP';

const pad = (n: number) => String(n).padStart(2, '0');
const dateOf = (d: Date) => `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
const timestampOf = (d: Date) => `${dateOf(d)} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;

const TRAILING_COUNTER = /_(\d{1,9})$/;
const TRAILING_DATE = /-\d{4}-\d{2}-\d{2}$/;
const TRAILING_TIMESTAMP = /-\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

function counter(name: string, taken: (n: string) => boolean): string {
  const m = TRAILING_COUNTER.exec(name);
  const stem = m ? name.slice(0, m.index) : name;
  let n = m ? Number(m[1]) + 1 : 1;
  while (taken(`${stem}_${n}`)) n++;
  return `${stem}_${n}`;
}

function stamped(name: string, suffix: string, trailing: RegExp, taken: (n: string) => boolean): string {
  if (name.endsWith(`-${suffix}`)) return counter(name, taken);
  const stem = trailing.test(name) ? name.replace(trailing, '') : name;
  const candidate = `${stem}-${suffix}`;
  return taken(candidate) ? counter(candidate, taken) : candidate;
}

export function cloneName(source: string, strategy: CloneNaming, now: Date, taken: (name: string) => boolean = () => false): string {
  switch (strategy) {
    case 'COUNTER':
      return counter(source, taken);
    case 'DATE':
      return stamped(source, dateOf(now), TRAILING_DATE, taken);
    case 'TIMESTAMP':
      return stamped(source, timestampOf(now), TRAILING_TIMESTAMP, taken);
    default:
      return source;
  }
}
