import Type from 'typebox';
import { f } from '../../core/fields.js';

/**
 * The declared fields of virtual-router firewall policies and their filters, as the recorded `schema/`
 * answers print them (dumps `response_vrfwpolicy_schema`, `response_vrfwfilter_schema`; reference §14.2).
 * They drive `schema/` and XML typing; the values themselves are validated in filters.ts and service.ts,
 * because the recorded requests send what the declared types do not describe (`filters: {}`, `*_op: "="`).
 */

const JOBS_HELP = 'Background jobs related to this resource';

export const policyFields = {
  active: f.boolean({ required: true, schemaDefault: null }),
  filters: f.relatedItems(Type.Unknown(), { required: true, help: 'Filters related to this policy' }),
  jobs: f.relatedItems(Type.Unknown(), { readonly: true, required: true, help: JOBS_HELP }),
  lan_interface: f.related({ nullable: true, default: null }),
  name: f.string({ required: true, maxLength: 1024, schemaDefault: null }),
  // The schema prints no bounds; an order is what the router sorts policies by.
  order: f.integer({ required: true, schemaDefault: null, minimum: 0, maximum: 2_147_483_647 }),
  resource_uri: f.string({ readonly: true, required: true }),
  upstream_interface: f.related({ nullable: true, default: null }),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'UUID of the Firewall Policy' }),
};

/** `icmp_type` choices in the order the recorded schema prints them. */
export const ICMP_TYPES = [
  'Redirect',
  'Time exceeded',
  'Time-stamp request',
  'Parameter unintelligible',
  'Information request',
  'Time-stamp reply',
  'Address mask request',
  'Information reply',
  'Address mask reply',
  'Echo reply',
  'Destination unreachable',
  'Any',
  'Source quench',
  'Echo request',
] as const;
export const ACTIONS = ['allow', 'deny'] as const;
export const PROTOCOLS = ['tcp', 'udp', 'icmp'] as const;

const op = () => f.boolean({ required: true, default: true });

export const filterFields = {
  action: f.string({ choices: ACTIONS, nullable: true, schemaDefault: null }),
  action_queue: f.string({ nullable: true, schemaDefault: null }),
  dst: f.string({ default: '' }),
  dst_addr_op: op(),
  dst_port: f.string({ required: true, schemaDefault: null }),
  dst_port_op: op(),
  icmp_type: f.string({ choices: ICMP_TYPES, nullable: true, schemaDefault: null }),
  jobs: f.relatedItems(Type.Unknown(), { readonly: true, required: true, help: JOBS_HELP }),
  log: f.boolean({ default: false }),
  order: f.integer({ required: true, schemaDefault: null }),
  protocol: f.string({ choices: PROTOCOLS, required: true, schemaDefault: null }),
  resource_uri: f.string({ readonly: true, required: true }),
  src: f.string({ default: '' }),
  src_addr_op: op(),
  src_port: f.string({ required: true, schemaDefault: null }),
  src_port_op: op(),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'UUID of the Firewall Filter' }),
};
