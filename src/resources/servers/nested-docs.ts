import { f, NO_DEFAULT, type Field } from '../../core/fields.js';

/**
 * Sub-fields that `schema/` documents under `fields` for nested values (a server's NICs, drive attachments,
 * GPUs, EPCs, runtime), as the recorded schemas describe them. Documentation only: what is accepted
 * is validated by the fields' own JSON schemas.
 */
export const serverDrivesDoc: Record<string, Field> = {
  boot_order: f.integer({ schemaDefault: null, help: 'Drive boot order' }),
  dev_channel: f.string({
    schemaDefault: null,
    help: 'Device channel in format {controller:unit} ex. 0:1, 0:2, etc. Keep in mind that there are limits based on emulation type - for example ide can have up to 2 controllers, 2 units each.',
    required: true,
  }),
  device: f.string({ schemaDefault: null, help: 'Device emulation type', required: true, choices: ['ide', 'virtio', 'scsi'] }),
  drive: f.related({ schemaDefault: null, help: 'Drive UUID', required: true }),
  runtime: f.related({
    schemaDefault: NO_DEFAULT,
    help: "Attached drive's runtime information",
    readonly: true,
    fields: {
      io: f.related({
        schemaDefault: null,
        help: 'A single related resource. Can be either a URI or set of nested resource data.',
        fields: {
          bytes_read: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          bytes_written: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          count_flush: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          count_read: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          count_written: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          total_time_ns_flush: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          total_time_ns_read: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
          total_time_ns_write: f.integer({ schemaDefault: 0, help: 'Integer data. Ex: 2673', required: true }),
        },
      }),
    },
  }),
};

export const serverEpcsDoc: Record<string, Field> = {
  size: f.integer({ schemaDefault: null, help: 'Size of the EPC in bytes', required: true }),
};

export const serverGpusDoc: Record<string, Field> = {
  gpu: f.related({
    schemaDefault: NO_DEFAULT,
    help: 'GPU details',
    readonly: true,
    fields: {
      model_id: f.string({ schemaDefault: null, help: 'Short model name of the GPU', required: true }),
      owner: f.related({ schemaDefault: null, help: 'GPU owner' }),
      resource_uri: f.string({ schemaDefault: NO_DEFAULT, help: 'Unicode string data. Ex: "Hello World"', readonly: true, required: true }),
      subscription: f.related({ schemaDefault: null, help: 'Subscription related to this GPU' }),
      uuid: f.string({ schemaDefault: null, help: 'UUID of the GPU' }),
    },
  }),
  model: f.string({ schemaDefault: null, help: 'Model of the GPU', required: true }),
};

export const serverNicsDoc: Record<string, Field> = {
  boot_order: f.integer({ schemaDefault: null, help: 'Device boot order' }),
  firewall_policy: f.related({ schemaDefault: null, help: 'Firewall policy' }),
  ip_v4_conf: f.related({
    schemaDefault: null,
    help: 'Public IPv4 configuration',
    fields: {
      conf: f.string({ schemaDefault: 'dhcp', help: 'Configuration type', required: true, choices: ['dhcp', 'static', 'manual'] }),
      ip: f.related({ schemaDefault: null, help: "An IP address reference. Only used in 'static' IP configuration type" }),
    },
  }),
  ip_v6_conf: f.related({
    schemaDefault: null,
    help: 'Public IPv6 configuration',
    fields: {
      conf: f.string({ schemaDefault: 'dhcp', help: 'Configuration type', required: true, choices: ['dhcp', 'static', 'manual'] }),
      ip: f.related({ schemaDefault: null, help: "An IP address reference. Only used in 'static' IP configuration type" }),
    },
  }),
  mac: f.string({ schemaDefault: null, help: 'MAC address of the server NIC', required: true }),
  model: f.string({ schemaDefault: null, help: 'Model of NIC', choices: ['rtl8139', 'e1000', 'virtio'] }),
  runtime: f.related({
    schemaDefault: NO_DEFAULT,
    help: 'NIC runtime information',
    readonly: true,
    fields: {
      interface_type: f.string({ schemaDefault: null, help: 'Type of interface', required: true, choices: ['public', 'private'] }),
      io: f.related({
        schemaDefault: null,
        help: 'NIC runtime Input and Output data',
        fields: {
          bytes_recv: f.integer({ schemaDefault: 0, help: 'Bytes received on this interface' }),
          bytes_sent: f.integer({ schemaDefault: 0, help: 'Packets received on this interface' }),
          packets_recv: f.integer({ schemaDefault: 0, help: 'Bytes sent from this interface' }),
          packets_sent: f.integer({ schemaDefault: 0, help: 'Packets sent from this interface' }),
        },
      }),
      ip_v4: f.related({ schemaDefault: null, help: 'Public IPv4 configuration' }),
      ip_v6: f.string({ schemaDefault: null, help: 'Public IPv6 configuration' }),
      rx_foreign: f.integer({ schemaDefault: 0, help: 'Bytes received on this interface' }),
      rx_local: f.integer({ schemaDefault: 0, help: 'Bytes received on this interface' }),
      tx_foreign: f.integer({ schemaDefault: 0, help: 'Bytes sent from this interface' }),
      tx_local: f.integer({ schemaDefault: 0, help: 'Bytes sent from this interface' }),
    },
  }),
  vlan: f.related({ schemaDefault: null, help: 'UUID of the private VLAN' }),
};

export const serverRuntimeDoc: Record<string, Field> = {
  active_since: f.string({ schemaDefault: NO_DEFAULT, help: 'Datetime object representing the exact time the guest was started.', required: true }),
  nics: f.related({
    schemaDefault: [],
    help: "The list of this server's NICs runtime",
    required: true,
    fields: {
      interface_type: f.string({ schemaDefault: null, help: 'Type of interface', required: true, choices: ['public', 'private'] }),
      io: f.related({
        schemaDefault: null,
        help: 'NIC runtime Input and Output data',
        fields: {
          bytes_recv: f.integer({ schemaDefault: 0, help: 'Bytes received on this interface' }),
          bytes_sent: f.integer({ schemaDefault: 0, help: 'Packets received on this interface' }),
          packets_recv: f.integer({ schemaDefault: 0, help: 'Bytes sent from this interface' }),
          packets_sent: f.integer({ schemaDefault: 0, help: 'Packets sent from this interface' }),
        },
      }),
      ip_v4: f.related({ schemaDefault: null, help: 'Public IPv4 configuration' }),
      ip_v6: f.string({ schemaDefault: null, help: 'Public IPv6 configuration' }),
      mac: f.string({ schemaDefault: null, help: 'MAC address of this NIC' }),
      rx_foreign: f.integer({ schemaDefault: 0, help: 'Bytes received on this interface' }),
      rx_local: f.integer({ schemaDefault: 0, help: 'Bytes received on this interface' }),
      tx_foreign: f.integer({ schemaDefault: 0, help: 'Bytes sent from this interface' }),
      tx_local: f.integer({ schemaDefault: 0, help: 'Bytes sent from this interface' }),
    },
  }),
};
