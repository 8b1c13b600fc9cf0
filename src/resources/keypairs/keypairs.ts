import Type from 'typebox';
import { f, NO_DEFAULT } from '../../core/fields.js';
import { relatedId, validateFields, type Obj } from '../../core/input.js';
import { validation } from '../../core/errors.js';
import { storedDecl } from '../../core/stored.js';
import type { CollectionDecl } from '../../core/resource.js';
import type { Services } from '../../core/context.js';
import type { Db, Tx } from '../../store/db.js';
import { formatPublicKey, generateRsaPair, generateRsaPairSync, KeyError, md5Fingerprint, parsePrivateKey, parsePublicKey, sshPublicBlob } from './sshkeys.js';
import { byCodePoint } from '../../core/order.js';

/**
 * SSH keypairs (reference §15) and their read-only mirror `/pubkeys/`.
 *
 * Three create modes: both keys given (stored as given once they parse and match), only `public_key`
 * (`private_key: null`), neither (a fresh RSA 2048 pair). Only `private_key` also works: the public half
 * is derived. `fingerprint` is the MD5 of the public key blob. PUT edits `name`, `meta` and `tags`; keys
 * sent back are ignored, as read-only keys are.
 *
 * Keypairs are never shared: the spec's ACL table names no permission for them and a grant would hand the
 * private key to the grantee. The objects carry `grantees: []` and `permissions: []` as the recorded API
 * shows, and another user's keypair is a 404 like any unshared object.
 */
const noSharing = (help: string) => f.list(Type.Unknown(), { default: undefined, schemaDefault: NO_DEFAULT, help });

const keypairFields = {
  fingerprint: f.string({ readonly: true, help: 'MD5 fingerprint of the public key' }),
  grantees: noSharing('Keypairs are not shared: always empty'),
  meta: f.dict({ help: 'User defined meta information' }),
  name: f.string({ required: true, maxLength: 1024, help: 'Human readable name of the keypair' }),
  permissions: noSharing('Keypairs are not shared: always empty'),
  private_key: f.string({
    nullable: true,
    default: null,
    maxLength: 16384,
    help: 'Private key in PEM format (PKCS#1, PKCS#8, SEC1 or OpenSSH, unencrypted); generated with the public key when neither is given. Fixed after creation.',
  }),
  public_key: f.string({
    maxLength: 16384,
    help: 'Public key in OpenSSH format: "ssh-rsa AAAA… comment" (also ssh-ed25519, ecdsa-sha2-nistp256/384/521). Fixed after creation.',
  }),
  resource_uri: f.string({ readonly: true }),
  tags: f.relatedMany(),
  uuid: f.string({ readonly: true, unique: true }),
};

const FILTERING = { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' } as const;

const given = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

/** A key that does not parse is a 400 on its field. */
function parsed<T>(point: string, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    if (e instanceof KeyError) throw validation(point, `Invalid ${point.replace('_', ' ')}: ${e.message}`);
    throw e;
  }
}

/** Check the keys of a new keypair and derive what is stored: fingerprint, and the public key if only the private one came. */
function keyFields(values: Obj): Obj {
  let { public_key: pubText, private_key: privText } = values;
  if (!given(pubText) && !given(privText)) ({ public_key: pubText, private_key: privText } = generateRsaPairSync()); // normally generated before (create below)
  const priv = given(privText) ? parsed('private_key', () => parsePrivateKey(privText as string)) : undefined;
  const pub = given(pubText) ? parsed('public_key', () => parsePublicKey(pubText as string)) : undefined;
  const derived = priv ? sshPublicBlob(priv) : undefined;
  if (pub && derived && !pub.blob.equals(derived.blob)) throw validation('public_key', 'The public key does not match the private key');
  const { type, blob } = pub ?? derived!;
  return {
    fingerprint: md5Fingerprint(blob),
    private_key: priv ? privText : null,
    public_key: pub ? (pubText as string).trim() : formatPublicKey(type, blob),
  };
}

export const keypairs = storedDecl(
  {
    kind: 'keypairs',
    flavour: 'model',
    fields: keypairFields,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    filtering: { ...FILTERING },
    taggable: true,
  },
  {
    prepare(values, mode) {
      if (mode === 'create') return { ...values, ...keyFields(values) };
      // Keys are fixed after creation; clients PUT the whole object back, so sent keys are ignored.
      delete values.public_key;
      delete values.private_key;
      return values;
    },
    async decorate(_ctx, objects) {
      for (const o of objects) {
        delete o.owner; // keypairs carry no owner (recorded dumps)
        o.grantees = [];
        o.permissions = [];
      }
    },
  },
);

// A new pair is generated off the event loop before the generic create (which validates everything again,
// then writes all objects in one transaction): a bad request is refused before any key is generated.
const createRows = keypairs.service.create.bind(keypairs.service);
const MAX_GENERATED_PER_REQUEST = 10;
keypairs.service.create = async (ctx, inputs) => {
  for (const input of inputs) validateFields(keypairs.fields, input, 'create');
  // An RSA 2048 pair costs ~100 ms of CPU: one request may not tie the machine up with hundreds.
  const toGenerate = inputs.filter((input) => !given(input.public_key) && !given(input.private_key)).length;
  if (toGenerate > MAX_GENERATED_PER_REQUEST)
    throw validation(
      'objects',
      `At most ${MAX_GENERATED_PER_REQUEST} keypairs can be generated in one request (${toGenerate} asked); import public keys, or send several requests`,
    );
  const filled = await Promise.all(
    inputs.map(async (input) => (given(input.public_key) || given(input.private_key) ? input : { ...input, ...(await generateRsaPair()) })),
  );
  return createRows(ctx, filled);
};

/** `/pubkeys/`: the same rows and uuids, without the private key. */
const pubkeyUri = (uuid: string) => `/api/2.0/pubkeys/${uuid}/`;

function asPubkey(keypair: Obj): Obj {
  const { private_key, ...rest } = keypair;
  return { ...rest, has_private_key: private_key !== null && private_key !== undefined, resource_uri: pubkeyUri(keypair.uuid as string) };
}

const readonly = <T extends { readonly: boolean }>(field: T): T => ({ ...field, readonly: true });
const { private_key: _private, ...publicFields } = keypairFields;
const pubkeyFields = Object.fromEntries(
  Object.entries({ ...publicFields, has_private_key: f.boolean({ help: 'Whether the keypair holds a private key' }) })
    .map(([name, field]) => [name, readonly(field)] as const)
    .sort(([a], [b]) => byCodePoint(a, b)),
);

export const pubkeys: CollectionDecl = {
  shape: 'collection',
  kind: 'pubkeys',
  flavour: 'model',
  fields: pubkeyFields,
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get'],
  filtering: { ...FILTERING },
  service: {
    async list(ctx, query) {
      const { total, objects } = await keypairs.service.list(ctx, query);
      return { total, objects: objects.map(asPubkey) };
    },
    get: async (ctx, uuid) => asPubkey(await keypairs.service.get(ctx, uuid)),
  },
};

// ---------------------------------------------------------------------------------------------------
// For servers: the `pubkeys` field

/**
 * Resolve a server's `pubkeys` input (a list of uuid strings, `{uuid}`, `{resource_uri, uuid}` or pubkey /
 * keypair URIs) to keypair uuids, in order, without duplicates. Every key must be a keypair of `owner` (the
 * server's owner, also when a grantee edits the server); anything else, or a value that is not a list, is a
 * 400 on `pubkeys`. null is []. Servers store these uuids and present them as `pubkeys` references.
 */
export async function resolvePubkeyUuids(s: Pick<Services, 'store'>, db: Db | Tx, owner: string, value: unknown): Promise<string[]> {
  if (value === null || value === undefined) return [];
  if (!Array.isArray(value)) throw validation('pubkeys', 'Expected a list of keypair uuids');
  const ids = [...new Set(value.map((v) => relatedId(v, 'pubkeys')))];
  if (!ids.length) return [];
  const have = await s.store.resources.existing(db, 'keypairs', ids, owner);
  const missing = ids.find((id) => !have.has(id));
  if (missing !== undefined) throw validation('pubkeys', `Keypair ${missing} does not exist`);
  return ids;
}
