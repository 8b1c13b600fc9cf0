import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkWebhookUrl,
  CREDENTIALS_IN_URL,
  INVALID_URL,
  isLocalHostText,
  isPublicAddress,
  PRIVATE_DESTINATION,
} from '../../src/resources/notifications/destinations.js';

test('public unicast addresses are public', () => {
  for (const ip of [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '185.12.6.10',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '198.17.255.255',
    '198.20.0.0',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2a00:1450:4001:82b::200e',
    '::ffff:8.8.8.8',
    '::ffff:808:808',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])
    assert.equal(isPublicAddress(ip), true, ip);
});

test('loopback, private, CGNAT, link-local, metadata, unspecified, multicast, broadcast, reserved, benchmarking and documentation are not', () => {
  const cases: [string, string][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'RFC 1918'],
    ['172.16.0.1', 'RFC 1918'],
    ['172.31.255.255', 'RFC 1918'],
    ['192.168.1.1', 'RFC 1918'],
    ['100.64.0.1', 'CGNAT'],
    ['100.100.100.200', 'CGNAT (Alibaba metadata)'],
    ['169.254.169.254', 'metadata'],
    ['169.254.0.1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'this network'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.1', 'documentation'],
    ['203.0.113.1', 'documentation'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['::1', 'v6 loopback'],
    ['::', 'v6 unspecified'],
    ['fe80::1', 'v6 link-local'],
    ['fe80::1%eth0', 'v6 link-local with a zone'],
    ['febf::1', 'v6 link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fd00:ec2::254', 'EC2 metadata'],
    ['ff02::1', 'v6 multicast'],
    ['2001:db8::1', 'v6 documentation'],
    ['3fff::1', 'v6 documentation'],
    ['2001::1', 'Teredo'],
    ['2001:2::1', 'v6 benchmarking'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::127.0.0.1', 'IPv4-compatible (deprecated)'],
    ['64:ff9b::7f00:1', 'NAT64 of loopback'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 of metadata'],
    ['64:ff9b:1::1', 'local-use NAT64'],
    ['2002:7f00:1::1', '6to4 of loopback'],
    ['2002:c0a8:101::1', '6to4 of a private address'],
    ['100::1', 'discard-only'],
    ['localhost', 'not an address'],
    ['', 'not an address'],
  ];
  for (const [ip, why] of cases) assert.equal(isPublicAddress(ip), false, `${ip} (${why})`);
});

test('host text: non-public literals and local-only names are known local; other names are left to delivery', () => {
  for (const host of [
    '127.0.0.1',
    '[::1]',
    '[::ffff:7f00:1]',
    'localhost',
    'localhost.',
    'LOCALHOST',
    'app.localhost',
    'metadata.google.internal',
    'printer.local',
    'metadata',
  ])
    assert.equal(isLocalHostText(host), true, host);
  for (const host of ['hooks.example.com', '8.8.8.8', '[2606:4700:4700::1111]', 'localhost.example.com', 'internal.example.com'])
    assert.equal(isLocalHostText(host), false, host);
});

test('webhook URLs: the WHATWG parser normalises numeric hosts before the check', () => {
  for (const url of [
    'http://127.0.0.1/',
    'http://localhost:1234/',
    'http://127.1/',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://0177.0.0.1/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://169.254.169.254/latest/meta-data',
    'http://10.0.0.1/',
    'http://[fe80::1]/',
    'http://[fd00:ec2::254]/',
    'http://metadata.google.internal/computeMetadata/v1/',
    'http://0/',
  ])
    assert.deepEqual(checkWebhookUrl(url, false), { refused: PRIVATE_DESTINATION }, url);
  for (const url of ['ftp://example.com/', 'not a url', 'file:///etc/passwd', 'javascript:alert(1)'])
    assert.deepEqual(checkWebhookUrl(url, false), { refused: INVALID_URL }, url);
  assert.deepEqual(checkWebhookUrl('https://user:pw@hooks.example.com/', false), { refused: CREDENTIALS_IN_URL });
  assert.deepEqual(checkWebhookUrl('https://user:pw@127.0.0.1/', true), { refused: CREDENTIALS_IN_URL });
  assert.equal(String((checkWebhookUrl('https://hooks.example.com/x?y=1', false) as { url: URL }).url), 'https://hooks.example.com/x?y=1');
  // Local development (`--webhooks-allow-private`): loopback is fine.
  assert.ok('url' in checkWebhookUrl('http://127.0.0.1:8080/hook', true));
  assert.ok('url' in checkWebhookUrl('http://localhost:8080/hook', true));
});
