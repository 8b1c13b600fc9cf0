import Type from 'typebox';
import { f } from '../../core/fields.js';
import { driveFields } from '../drives/fields.js';

/**
 * Library drive fields and help texts as the recorded `libdrives/schema/` shows them (reference §6.6,
 * Appendix A): a drive's fields plus the image description. The recorded help of `url` is a copy of
 * `arch`'s; it is kept as recorded.
 */
export const libdriveFields = {
  affinities: driveFields.affinities,
  allow_multimount: driveFields.allow_multimount,
  arch: f.string({ required: true, schemaDefault: null, help: 'Operating system bit architecture the drive.' }),
  category: f.list(Type.String({ maxLength: 64 }), { schemaDefault: [], help: 'Category of the drive.' }),
  description: f.string({ nullable: true, schemaDefault: null, help: 'Description of drive image.' }),
  distribution: f.string({ nullable: true, schemaDefault: null, help: 'OS distribution of the drive.' }),
  favourite: f.boolean({ required: true, schemaDefault: null, help: 'Favourite drive image for user.' }),
  image_type: f.string({ required: true, schemaDefault: null, help: 'Type of drive image.' }),
  install_notes: f.string({ nullable: true, schemaDefault: null, help: 'Install notes for the drive image.' }),
  jobs: driveFields.jobs,
  licenses: driveFields.licenses,
  media: driveFields.media,
  meta: driveFields.meta,
  mounted_on: driveFields.mounted_on,
  name: driveFields.name,
  os: f.string({ required: true, schemaDefault: null, help: 'Operating system of the drive.' }),
  owner: driveFields.owner,
  paid: f.boolean({ required: true, schemaDefault: null, help: 'Paid or free.' }),
  resource_uri: driveFields.resource_uri,
  size: driveFields.size,
  status: driveFields.status,
  // Listed as required, yet every recorded library drive shows null (the storage is the location's business).
  storage_type: f.string({ required: true, nullable: true, help: 'Underlying storage' }),
  tags: driveFields.tags,
  url: f.string({ nullable: true, schemaDefault: null, help: 'Operating system bit architecture the drive.' }),
  uuid: driveFields.uuid,
  version: f.string({ nullable: true, schemaDefault: null, help: 'OS version of the drive.' }),
};
