import Type from 'typebox';
import { f, NO_DEFAULT, type Field } from '../../core/fields.js';

export const MEDIA = ['cdrom', 'disk'] as const;
/** Storage types the schema names; a location offers those its capabilities list. */
export const STORAGE_TYPES = ['magnetic', 'ssd', 'dssd', 'zadara', 'solidfire'] as const;

/** One entry of a drive's `licenses`, as `schema/` describes it under `fields`. */
const licenseFields = {
  amount: f.integer({ default: 1, help: 'Number of licenses' }),
  license: f.related({ required: true }),
  user: f.related({ nullable: true, schemaDefault: null, help: 'Owner of the license' }),
};

/** What `schema/` documents of a drive's `runtime` (as recorded). */
const runtimeDoc: Record<string, Field> = {
  is_snapshotable: f.boolean({ schemaDefault: NO_DEFAULT, help: 'Specifies if the drive supports snapshotting', readonly: true, required: true }),
  snapshots_allocated_size: f.integer({ schemaDefault: NO_DEFAULT, help: "Sum of the allocated size of this drive's snapshots", readonly: true }),
  storage_type: f.string({ schemaDefault: NO_DEFAULT, help: 'Underlying storage', readonly: true, required: true }),
};

/** Drive fields and help texts as the recorded `drives/schema/` shows them (reference §6.2). */
export const driveFields = {
  affinities: f.list(Type.Union([Type.Literal('ssd')]), {
    default: () => [],
    schemaDefault: [],
    choices: ['ssd'],
    help: 'A list of affinities this drive should belong to',
  }),
  allow_multimount: f.boolean({ default: false, help: 'Allow the drive to be mounted on multiple guests. Not taken into account when drive is cdrom.' }),
  jobs: f.relatedItems(Type.Unknown(), { readonly: true, required: true, help: 'Background jobs related to this resource' }),
  licenses: f.relatedItems(Type.Unknown(), { schemaDefault: [], help: 'A list of licenses attached to this drive', fields: licenseFields }),
  media: f.string({ required: true, choices: MEDIA, schemaDefault: null, help: 'Media representation type' }),
  meta: f.dict({ schemaDefault: {}, help: 'User defined meta information' }),
  mounted_on: f.relatedItems(Type.Unknown(), { readonly: true, help: 'Servers on which this drive is mounted on' }),
  name: f.string({ required: true, maxLength: 1024, schemaDefault: null, help: 'Human readable name of the drive' }),
  // null for library drives, which /drives/ lists too.
  owner: f.related({ readonly: true, nullable: true, schemaDefault: null, help: 'Owner of the drive' }),
  resource_uri: f.string({ readonly: true, required: true }),
  // tastypie calls it related; answers show the runtime object itself.
  runtime: f.related({ readonly: true, help: 'Runtime information of the drive', fields: runtimeDoc, output: Type.Record(Type.String(), Type.Unknown()) }),
  size: f.integer({ required: true, minimum: 1, numericStrings: true, schemaDefault: null, help: 'Size of the drive in bytes' }),
  snapshots: f.relatedItems(Type.Unknown(), { readonly: true, help: 'Servers on which this drive is mounted on' }),
  status: f.string({ readonly: true, required: true, help: 'Status of the drive.' }),
  storage_type: f.string({ choices: STORAGE_TYPES, schemaDefault: null, help: 'Underlying storage' }),
  tags: f.relatedMany({ help: 'Many related resources. Can be either a list of URIs or list of individually nested resource data.' }),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'UUID of the drive' }),
};
