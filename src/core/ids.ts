import { randomUUID } from 'node:crypto';

/** Id generation is injected so tests can make it deterministic. */
export interface IdGenerator {
  uuid(): string;
}

export const randomIds: IdGenerator = { uuid: () => randomUUID() };
