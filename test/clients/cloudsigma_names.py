"""The test's name mapping for *.cloudsigma.com: what a hosts-file entry does for a real client.

A client of the real service connects to https://<location>.cloudsigma.com (port 443). To reach a Stratus
serving --tls on loopback, the client needs the name to resolve to 127.0.0.1 and, because the test server
listens on a free port instead of 443, that port. Patching socket.getaddrinfo in the test process gives
both, below every library: the client code (libcloud, requests, urllib3, ssl) is untouched, and TLS still
verifies the certificate against the name the client asked for.
"""
import socket

_original = socket.getaddrinfo


def install(port, suffix='.cloudsigma.com'):
    def getaddrinfo(host, service, family=0, type=0, proto=0, flags=0):
        if isinstance(host, str) and (host == suffix[1:] or host.endswith(suffix)):
            return _original('127.0.0.1', port, socket.AF_INET, type, proto, flags)
        return _original(host, service, family, type, proto, flags)

    socket.getaddrinfo = getaddrinfo
