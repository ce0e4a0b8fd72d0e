"""TLS between the parts: what a process serves with and what its clients trust.

A process given a certificate and its key (``PERSO_TLS_CERT_FILE``, ``PERSO_TLS_KEY_FILE``)
serves HTTPS; every client of another part (an edge's origins, an origin's operations
scraper and its catalog replication) verifies the certificate it is shown against
``PERSO_TLS_CA_FILE``, else the system's trust store. Plain HTTP stays the default: the
parts of one machine or one private network may do without.
"""

from __future__ import annotations

import ssl

from config.settings import Settings


def scheme(settings: Settings) -> str:
    """``https`` when the process serves with a certificate, else ``http``."""
    return "https" if settings.tls_cert_file is not None else "http"


def client_verify(settings: Settings) -> ssl.SSLContext | bool:
    """What a client of another part verifies certificates with (httpx's ``verify``): the
    parts' CA file, else the system's trust store (True)."""
    if settings.tls_ca_file is None:
        return True
    return ssl.create_default_context(cafile=str(settings.tls_ca_file))
