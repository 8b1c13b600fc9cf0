import Type from 'typebox';
import { f } from '../../core/fields.js';
import { serverDrivesDoc, serverEpcsDoc, serverGpusDoc, serverNicsDoc, serverRuntimeDoc } from './nested-docs.js';

const ref = Type.Union([Type.String(), Type.Object({ uuid: Type.Optional(Type.String()), resource_uri: Type.Optional(Type.String()) })]);
const ipConf = Type.Union([
  Type.Object({ conf: Type.Optional(Type.Union([Type.String(), Type.Null()])), ip: Type.Optional(Type.Union([ref, Type.Null()])) }),
  Type.Null(),
]);

/** A drive attachment as requests give it (responses add `runtime` and expand `drive`). */
export const attachmentSchema = Type.Object({
  boot_order: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1024 }), Type.Null()])),
  dev_channel: Type.Optional(Type.String({ maxLength: 16 })),
  device: Type.Optional(Type.String({ maxLength: 16 })),
  drive: ref,
  runtime: Type.Optional(Type.Unknown()),
});

export const nicSchema = Type.Object({
  boot_order: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1024 }), Type.Null()])),
  firewall_policy: Type.Optional(Type.Union([ref, Type.Null()])),
  ip_v4_conf: Type.Optional(ipConf),
  ip_v6_conf: Type.Optional(ipConf),
  mac: Type.Optional(Type.Union([Type.String({ maxLength: 17 }), Type.Null()])),
  model: Type.Optional(Type.Union([Type.String({ maxLength: 16 }), Type.Null()])),
  runtime: Type.Optional(Type.Unknown()),
  vlan: Type.Optional(Type.Union([ref, Type.Null()])),
});

/** Server fields, defaults and help texts as the recorded `servers/schema/` shows them (reference §5.2). */
/** Keys requests may give that answers never show (the recorded servers leave them out). */
const notShown = { mayBeAbsent: true } as const;

export const serverFields = {
  allocation_pool: f.string({ ...notShown, nullable: true, schemaDefault: null, help: 'Host Allocation Pool associated to the server' }),
  auto_start: f.boolean({ ...notShown, schemaDefault: false, help: 'Enable auto starting of the guest after a clone.' }),
  context: f.boolean({ default: true, help: 'Enable guest context serial device' }),
  cpu: f.integer({ required: true, numericStrings: true, schemaDefault: null, help: "Server's CPU Clock speed measured in MHz" }),
  cpu_model: f.string({
    nullable: true,
    default: null,
    choices: ['kvm64'],
    help: "Choose the virtual CPU model, for mitigating compatibility issues between the guest operating system and the underlying host's CPU. If not specified, all of the hypervisor's CPU capabilities are passed directly to the virtual machine.",
  }),
  // Absent on create: the location's cpu type (`--cpu-type`), filled in by the servers kind.
  cpu_type: f.string({
    schemaDefault: 'amd',
    choices: ['amd', 'intel', 'sparc_t4', 'sparc_t5', 'vmware'],
    help: 'Specify the CPU type of the host on which this virtual server should run',
  }),
  cpus_instead_of_cores: f.boolean({ default: false, help: 'Expose server SMPs as separate CPUs, instead of cores of a single CPU.' }),
  drives: f.relatedItems(attachmentSchema, { schemaDefault: [], fields: serverDrivesDoc, help: 'List of attached Drives to server' }),
  enable_numa: f.boolean({ default: false, help: 'Expose NUMA topology to the server.' }),
  epcs: f.relatedItems(Type.Unknown(), { ...notShown, default: undefined, schemaDefault: [], fields: serverEpcsDoc, help: 'List of defined EPCs' }),
  gpus: f.relatedItems(Type.Unknown(), { ...notShown, default: undefined, schemaDefault: [], fields: serverGpusDoc, help: 'List of attached GPUs' }),
  hv_relaxed: f.boolean({ default: false, help: 'Improve performance of Windows servers.' }),
  hv_tsc: f.boolean({ default: false, help: 'Improves performance of Windows servers with the trade off that the servers cannot be live migrated.' }),
  hypervisor: f.string({ default: 'kvm', choices: ['kvm', 'solaris-kz'], help: 'Specify hypervisor on which this server should run' }),
  is_grey: f.boolean({ ...notShown, schemaDefault: false, help: 'Specifies if server can be used to fill up free capacity' }),
  jobs: f.relatedItems(Type.Unknown(), { readonly: true, required: true, help: 'Background jobs related to this resource' }),
  mem: f.integer({ required: true, numericStrings: true, schemaDefault: null, help: "Server's Random Access Memory measured in bytes" }),
  meta: f.dict({ schemaDefault: {}, help: 'User assigned meta information for this server' }),
  name: f.string({ required: true, maxLength: 1024, schemaDefault: null, help: 'Human readable name of server' }),
  nics: f.relatedItems(nicSchema, { schemaDefault: [], fields: serverNicsDoc, help: 'The list of nics attached to this server' }),
  owner: f.related({ readonly: true, required: true, schemaDefault: null, help: 'UUID of the server owner' }),
  pubkeys: f.relatedItems(ref, { schemaDefault: [], help: 'List of SSH keys for that server' }),
  requirements: f.list(Type.String({ maxLength: 64 }), { schemaDefault: [], help: 'A collection of special requirements for this server' }),
  resource_uri: f.string({ readonly: true, required: true }),
  // tastypie calls it related; answers show the runtime object itself (null while the server is not running).
  runtime: f.related({
    readonly: true,
    help: 'Runtime information of the guest',
    fields: serverRuntimeDoc,
    output: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  }),
  // No fixed default: when absent, as many cores as the cpu needs at the host's top speed per core (1 for the usual sizes).
  smp: f.integer({ numericStrings: true, minimum: 1, schemaDefault: null, help: 'Symmetric Multiprocessing (SMP) i.e. number of CPU cores' }),
  status: f.string({ readonly: true, help: 'Status of the guest.' }),
  tags: f.relatedMany({ help: 'Many related resources. Can be either a list of URIs or list of individually nested resource data.' }),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'UUID of server' }),
  vnc_password: f.string({ required: true, maxLength: 64, schemaDefault: null, help: 'VNC Password to connect to server' }),
};
