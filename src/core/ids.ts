import { randomUUID } from 'node:crypto';

/** Id generation is injected so tests can make it deterministic. */
export interface IdGenerator {
  uuid(): string;
}

export const randomIds: IdGenerator = { uuid: () => randomUUID() };

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID_RE.test(s);
