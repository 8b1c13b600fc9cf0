"""Apache libcloud's CloudSigma 2.0 driver against a Stratus server on loopback.

Usage: /usr/bin/python3 libcloud_smoke.py http://127.0.0.1:PORT EMAIL PASSWORD
       SSL_CERT_FILE=ca.pem /usr/bin/python3 libcloud_smoke.py https://127.0.0.1:PORT EMAIL PASSWORD
Every driver call must succeed; the script prints one line per step and exits non-zero on failure.
The driver only speaks https to <region>.cloudsigma.com. Against a plain-http server its connection is
pointed at the loopback server; against a server with --tls nothing about the client changes: the driver
is built as for the real cloud (region='zrh') and only the name *.cloudsigma.com is mapped to the server
(cloudsigma_names.py, what a hosts-file entry does), its CA trusted through SSL_CERT_FILE.
"""
import sys
import time
from urllib.parse import urlparse

from libcloud.compute.drivers.cloudsigma import CloudSigmaNodeDriver

base, email, password = sys.argv[1:4]
url = urlparse(base)

if url.scheme == 'https':
    import cloudsigma_names

    cloudsigma_names.install(url.port)
    driver = CloudSigmaNodeDriver(email, password, api_version='2.0', region='zrh')
    assert driver.connection.host == 'zrh.cloudsigma.com' and driver.connection.secure, driver.connection.host
else:
    driver = CloudSigmaNodeDriver(email, password, api_version='2.0', region='zrh')
    driver.connection.host = url.hostname
    driver.connection.port = url.port
    driver.connection.secure = False
    driver.connection.connection = None
driver.DRIVE_TRANSITION_SLEEP_INTERVAL = 0.2


def step(name, value=None):
    print('ok', name, '' if value is None else value, flush=True)


def wait_for(node_id, state, timeout=30):
    start = time.time()
    while True:
        node = driver.ex_get_node(node_id)
        if node.extra.get('status') == state or node.state == state:
            return node
        if time.time() - start > timeout:
            raise SystemExit('timed out waiting for %s to be %s (is %s)' % (node_id, state, node.extra.get('status')))
        time.sleep(0.2)


caps = driver.ex_list_capabilities()
step('capabilities', sorted(caps.keys()))

images = driver.list_images()
assert images, 'no library images'
step('list_images', len(images))
image = [i for i in images if i.extra.get('image_type') == 'preinst' and i.extra.get('media', 'disk') == 'disk'][0]

drive = driver.ex_create_drive(name='libcloud-volume', size=1)
step('ex_create_drive', drive.id)
drive = driver._wait_for_drive_state_transition(drive, 'unmounted')
step('drive unmounted', drive.status)
assert any(v.id == drive.id for v in driver.list_volumes()), 'created drive not listed'
step('list_volumes')

sizes = driver.list_sizes()
size = [s for s in sizes if s.id == 'micro-regular'][0] if any(s.id == 'micro-regular' for s in sizes) else sizes[0]
node = driver.create_node(name='libcloud-node', size=size, image=image)
step('create_node', node.id)

nodes = driver.list_nodes()
assert any(n.id == node.id for n in nodes), 'node not listed'
step('list_nodes', len(nodes))

node = wait_for(node.id, 'running')
step('node running', node.public_ips)

# Availability groups: the running node is on one simulated host, the drives on storage nodes.
server_groups = driver.ex_list_servers_availability_groups()
assert isinstance(server_groups, list) and all(isinstance(g, list) for g in server_groups), server_groups
assert [g for g in server_groups if node.id in g], server_groups
step('ex_list_servers_availability_groups', server_groups)
drive_groups = driver.ex_list_drives_availability_groups()
assert isinstance(drive_groups, list) and any(drive.id in g for g in drive_groups), drive_groups
step('ex_list_drives_availability_groups', len(drive_groups))

tag = driver.ex_create_tag(name='libcloud-tag')
step('ex_create_tag', tag.id)
# libcloud 3.4's ex_tag_resources iterates the tag's old resources instead of the new ones, so it PUTs
# an unchanged list (the real API would see the same); the call itself must succeed.
driver.ex_tag_resource(node, tag)
step('ex_tag_resource')
# Tag the node the way the API defines it (the server's `tags`), then list through the tag.
driver.ex_edit_node(node, {'tags': [tag.id]})
tagged = driver.list_nodes(ex_tag=tag)
assert [n.id for n in tagged] == [node.id], 'tagged node not listed under the tag'
step('list_nodes(ex_tag)')
assert any(t.id == tag.id for t in driver.ex_list_tags())
step('ex_list_tags')

vnc = driver.ex_open_vnc_tunnel(node)
assert vnc.startswith('vnc://'), vnc
step('ex_open_vnc_tunnel', vnc)
assert driver.ex_close_vnc_tunnel(node)
step('ex_close_vnc_tunnel')

assert driver.stop_node(node)
step('stop_node')
wait_for(node.id, 'stopped')
step('node stopped')
assert driver.start_node(node)
wait_for(node.id, 'running')
assert driver.ex_stop_node(node)
wait_for(node.id, 'stopped')
step('start/stop again')

# Firewall policies: created with and without rules (normalised as recorded), listed, deleted.
bare = driver.ex_create_firewall_policy(name='libcloud-bare')
assert bare.name == 'libcloud-bare' and bare.rules == [], bare.rules
step('ex_create_firewall_policy (no rules)', bare.id)
rules = [
    {'action': 'accept', 'direction': 'in', 'ip_proto': 'tcp', 'src_ip': '172.66.32.0/24', 'dst_port': '22', 'comment': 'ssh from the office'},
    {'action': 'drop', 'direction': 'in', 'ip_proto': 'tcp', 'dst_port': '22'},
    {'action': 'drop', 'direction': 'out', 'dst_ip': '23'},
]
policy = driver.ex_create_firewall_policy(name='libcloud-policy', rules=rules)
assert [r.dst_ip for r in policy.rules] == [None, None, '23.0.0.0/32'], [r.dst_ip for r in policy.rules]
assert policy.rules[0].src_ip == '172.66.32.0/24' and policy.rules[1].action == 'drop'
step('ex_create_firewall_policy (rules)', policy.id)
listed = {p.id: p for p in driver.ex_list_firewall_policies()}
assert bare.id in listed and policy.id in listed and len(listed[policy.id].rules) == 3
step('ex_list_firewall_policies', len(listed))
# (ex_attach_firewall_policy goes through ex_edit_node, which sends `cpu` as cpu/2000 and `mem` in MiB:
# a stopped server refuses that as the real API would, a running one ignores NIC changes. Not used here.)
assert driver.ex_delete_firewall_policy(bare)
assert driver.ex_delete_firewall_policy(policy)
assert not driver.ex_list_firewall_policies()
step('ex_delete_firewall_policy')

assert driver.destroy_node(node, ex_delete_drives=True)
step('destroy_node')
assert driver.ex_delete_tag(tag)
step('ex_delete_tag')
assert driver.destroy_volume(drive)
step('destroy_volume')
assert not any(n.id == node.id for n in driver.list_nodes())

# Billing (issue 14): balance, pricing, current usage, subscriptions through the driver's own calls.
balance = driver.ex_get_balance()
assert set(balance) >= {'balance', 'currency'} and float(balance['balance']) > 0, balance
step('ex_get_balance', balance['currency'])
pricing = driver.ex_get_pricing()
assert pricing['objects'] and 'cpu' in pricing['current'] and 'cpu' in pricing['next'], list(pricing)
step('ex_get_pricing', len(pricing['objects']))
usage = driver.ex_get_usage()
assert 'cpu' in usage['usage'] and set(usage['usage']['cpu']) == {'burst', 'subscribed', 'using'}, usage
step('ex_get_usage')
sub = driver.ex_create_subscription(amount=1, period='1 month', resource='vlan', auto_renew=False)
assert sub.resource == 'vlan' and sub.amount == 1 and sub.status == 'active' and sub.subscribed_object, sub
step('ex_create_subscription', sub.id)
subs = driver.ex_list_subscriptions(status='active', resources=['vlan'])
assert [s.id for s in subs] == [sub.id], subs
assert driver.ex_toggle_subscription_auto_renew(sub)
assert driver.ex_list_subscriptions()[0].auto_renew is True
step('ex_list_subscriptions / ex_toggle_subscription_auto_renew')
print('ALL OK', flush=True)
