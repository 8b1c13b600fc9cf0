import { LOCATIONS } from '../../core/locations.js';
import type { SingletonDecl } from '../../core/resource.js';

/**
 * Where a location's web console is, from the location's base (`https://sjc.cloudsigma.com`): the one place that
 * says so (`/locations/`' `default_frontend_url`; the console itself is served at `/ui/` of every location).
 */
export const consoleUrl = (base: string): string => `${base}/ui/`;

export function describeLocation(code: string): Record<string, string> {
  const host = `${code}.cloudsigma.com`;
  const known = LOCATIONS[code];
  const [displayName, countryCode] = known ? [known.displayName, known.countryCode] : [code.toUpperCase(), ''];
  return {
    alternative_frontend_url: `https://${host}/ui/2.0/`,
    api_endpoint: `https://${host}/api/2.0/`,
    country_code: countryCode,
    default_frontend_signup_url: consoleUrl(`https://${host}`),
    default_frontend_url: consoleUrl(`https://${host}`),
    display_name: displayName,
    documentation_url: `https://cloudsigma-docs.readthedocs.org/en/${known?.docs ?? '2.14'}/`,
    id: code.toUpperCase(),
    upload_url: `https://direct.${host}/api/2.0/`,
    websocket_url: `wss://direct.${host}/websocket`,
  };
}

export const locations: SingletonDecl = {
  shape: 'singleton',
  kind: 'locations',
  flavour: 'custom',
  fields: {},
  defaultLimit: 0,
  listMethods: ['get'],
  detailMethods: [],
  envelope: true,
  schemaOverride: { allowed_methods: ['get'], help_text: 'The locations of the cloud and their URLs' },
  service: {
    async get(ctx) {
      const served = ctx.config.locations.length > 1 ? ctx.config.locations : [ctx.config.location];
      return { meta: { limit: 0, offset: 0, total_count: served.length }, objects: served.map(describeLocation) };
    },
  },
};

/**
 * `GET /cloud_status/` (reference §19; the Go SDK's CloudStatus): the features this cloud offers. Stratus
 * has sign-up, guest and trial accounts; none of the newer products (VPC, VMware, remote snapshots, host
 * availability zones, SSO) and no free tier.
 */
export const cloudStatus: SingletonDecl = {
  shape: 'singleton',
  kind: 'cloud_status',
  flavour: 'custom',
  fields: {},
  defaultLimit: 0,
  listMethods: ['get'],
  detailMethods: [],
  schemaOverride: { allowed_methods: ['get'], help_text: 'Features of this cloud' },
  service: {
    async get() {
      return {
        free_tier: { dssd: 0, mem: 0 },
        free_tier_monthly: { tx: 0 },
        guest: true,
        host_availability_zones: false,
        remote_snapshots: false,
        signup: true,
        sso: [],
        trial: true,
        vmware: false,
        vpc: false,
      };
    },
  },
};
