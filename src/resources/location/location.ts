import type { SingletonDecl } from '../../core/resource.js';

/** Locations the real service had when it was recorded (reference §19): display name and country. */
const KNOWN: Record<string, [displayName: string, countryCode: string]> = {
  dub: ['Dublin, Ireland', 'IE'],
  fra: ['Frankfurt, Germany', 'DE'],
  gva: ['Geneva, Switzerland', 'CH'],
  hnl: ['Honolulu, United States', 'US'],
  mel: ['Melbourne, Australia', 'AU'],
  mia: ['Miami, United States', 'US'],
  mnl: ['Manila, Philippines', 'PH'],
  per: ['Perth, Australia', 'AU'],
  ruh: ['Riyadh, Saudi Arabia', 'SA'],
  sjc: ['San Jose, United States', 'US'],
  tyo: ['Tokyo, Japan', 'JP'],
  wdc: ['Washington DC, United States', 'US'],
  zrh: ['Zurich, Switzerland', 'CH'],
};

/**
 * `GET /locations/` (reference §19): this service is one location, the configured one (`--location`),
 * described as the recorded answer describes each location. Every URL names `<location>.cloudsigma.com`,
 * the name this service answers as (with `--tls` a client needs only a name mapping to reach it).
 * The recorded answer lists every location of the real cloud; a client following one of those would
 * leave the simulation, so only this one is listed.
 */
export function describeLocation(code: string): Record<string, string> {
  const host = `${code}.cloudsigma.com`;
  const [displayName, countryCode] = KNOWN[code] ?? [code.toUpperCase(), ''];
  return {
    alternative_frontend_url: `https://${host}/ui/2.0/`,
    api_endpoint: `https://${host}/api/2.0/`,
    country_code: countryCode,
    default_frontend_signup_url: `https://${host}/ui/`,
    default_frontend_url: `https://${host}/ui/`,
    display_name: displayName,
    documentation_url: 'https://cloudsigma-docs.readthedocs.org/en/2.14/',
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
      return { meta: { limit: 0, offset: 0, total_count: 1 }, objects: [describeLocation(ctx.config.location)] };
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
