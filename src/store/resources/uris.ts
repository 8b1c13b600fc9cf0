/**
 * How the API names stored objects (`/api/2.0/<kind>/<uuid>/`, owners as users): spelled once, for the
 * rows this family reads and for every kind that shows a reference.
 */

/** A reference as the API shows it. */
export interface Ref {
  resource_uri: string;
  uuid: string;
}

export const API_PREFIX = '/api/2.0/';
export const resourceUri = (kind: string, uuid: string): string => `${API_PREFIX}${kind}/${uuid}/`;
export const ref = (kind: string, uuid: string): Ref => ({ resource_uri: resourceUri(kind, uuid), uuid });
export const userUri = (uuid: string): string => resourceUri('user', uuid);
export const ownerRef = (uuid: string | null): Ref | null => (uuid ? ref('user', uuid) : null);
