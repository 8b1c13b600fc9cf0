"""Apache libcloud's CloudSigma 2.0 driver against one Stratus serving two locations (--locations zrh,sjc).

Usage: /usr/bin/python3 libcloud_locations.py http://127.0.0.1:PORT EMAIL PASSWORD
       SSL_CERT_FILE=ca.pem /usr/bin/python3 libcloud_locations.py https://127.0.0.1:PORT EMAIL PASSWORD
The same account (e-mail and password) exists in both locations. Over https the drivers are built as for the
real cloud, region='zrh' and region='sjc', and only *.cloudsigma.com is mapped to the server
(cloudsigma_names.py); over plain http each driver's connection is pointed at the server and its location's
path prefix (the README's local recipe). Each location must see its own drives only, its own currency and
its own library. Prints ALL OK.
"""
import sys
from urllib.parse import urlparse

from libcloud.compute.drivers.cloudsigma import CloudSigmaNodeDriver

base, email, password = sys.argv[1:4]
url = urlparse(base)
if url.scheme == 'https':
    import cloudsigma_names

    cloudsigma_names.install(url.port)


def driver_for(region):
    driver = CloudSigmaNodeDriver(email, password, api_version='2.0', region=region)
    if url.scheme == 'https':
        assert driver.connection.host == '%s.cloudsigma.com' % region and driver.connection.secure
    else:
        driver.connection.host = url.hostname
        driver.connection.port = url.port
        driver.connection.secure = False
        driver.connection.api_prefix = '/%s/api/2.0' % region
        driver.connection.connection = None
    driver.DRIVE_TRANSITION_SLEEP_INTERVAL = 0.2
    return driver


drivers = {region: driver_for(region) for region in ('zrh', 'sjc')}
made = {}
for region, driver in drivers.items():
    made[region] = driver.ex_create_drive(name='lc-%s' % region, size=1).id
    print('ok created', region, made[region], flush=True)

for region, driver in drivers.items():
    names = sorted(d.name for d in driver.ex_list_user_drives())
    assert names == ['lc-%s' % region], (region, names)
    print('ok drives', region, names, flush=True)

currencies = {region: driver.ex_get_balance()['currency'] for region, driver in drivers.items()}
assert currencies == {'zrh': 'EUR', 'sjc': 'USD'}, currencies
print('ok currencies', currencies, flush=True)

images = {region: len(driver.list_images()) for region, driver in drivers.items()}
assert images['zrh'] > images['sjc'] > 0, images
print('ok images', images, flush=True)

kvm = {region: driver.ex_list_capabilities()['hypervisors']['kvm'] for region, driver in drivers.items()}
assert kvm == {'zrh': ['amd'], 'sjc': ['intel']}, kvm
print('ok capabilities', kvm, flush=True)
print('ALL OK')
