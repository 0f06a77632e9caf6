"""TLS settings of a deployment and the SSL contexts made from them (trio's SSL streams).

A topology's ``[tls]`` table (``docs/topology.md``)::

    [tls]
    ca = "certs/ca.pem"          # the CA that signed every node's certificate
    cert = "certs/{name}.pem"    # this node's certificate chain; {name} is the node's name
    key = "certs/{name}.key"     # its private key
    mutual = true                # nodes also require a certificate from whoever connects

Nodes listen with TLS; a child dials its parent with TLS, verifying the parent's certificate
against ``ca`` for the parent's host (and, with ``mutual``, showing its own). Clients pass an
:class:`ssl.SSLContext` (:func:`client_context`) to :func:`feds.client.connect`, or
``--tls-ca`` (and ``--tls-cert``/``--tls-key`` for mutual TLS) on the command line.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

__all__ = ["TlsSettings", "client_context"]


@dataclass(frozen=True)
class TlsSettings:
    """Paths (``{name}`` stands for a node's name in ``cert`` and ``key``) and the mode."""

    ca: str
    cert: str
    key: str
    mutual: bool = False

    def for_node(self, name: str) -> tuple[str, str]:
        """The certificate and key paths of node ``name``."""
        return self.cert.replace("{name}", name), self.key.replace("{name}", name)

    def server_context(self, name: str) -> ssl.SSLContext:
        """What node ``name`` listens with (raises ``OSError``/``ssl.SSLError`` if the files
        cannot be used)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*self.for_node(name))
        if self.mutual:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.ca)
        return context

    def uplink_context(self, name: str) -> ssl.SSLContext:
        """What node ``name`` dials its parent with."""
        return (
            client_context(self.ca, *self.for_node(name))
            if self.mutual
            else client_context(self.ca)
        )


def client_context(ca: str, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """A context that verifies a node's certificate against ``ca`` (and shows ``cert``/``key``
    for mutual TLS)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context
