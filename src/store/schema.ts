import type { Generated } from 'kysely';

/** Row types of every table, as Kysely sees them. JSON columns hold text in both engines. */
export interface UsersTable {
  uuid: string;
  email: string;
  password_hash: string | null;
  state: string;
  profile: string;
  created_at: string;
}

/**
 * One table for every declared resource kind: the columns that filters, visibility and ordering need are
 * real indexed columns; the rest of the object is the JSON `body`.
 */
export interface ResourcesTable {
  seq: Generated<number>;
  kind: string;
  uuid: string;
  owner_uuid: string | null;
  name: string | null;
  body: string;
  created_at: string;
  updated_at: string;
}

/** Tag membership: which resources carry which tag (both directions are indexed). */
export interface TagMembersTable {
  seq: Generated<number>;
  tag_uuid: string;
  res_type: string;
  res_uuid: string;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface Database {
  settings: SettingsTable;
  users: UsersTable;
  resources: ResourcesTable;
  tag_members: TagMembersTable;
}
