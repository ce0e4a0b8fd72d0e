"""Certificates for the parts' TLS in tests (``config/tls.py``), made by ``trustme``: a CA,
a certificate for the loopback names signed by it, and a CA that signed nothing here."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Pki:
    ca: Path  # what the parts trust
    cert: Path  # the parts' certificate (127.0.0.1, localhost) and its chain
    key: Path
    other_ca: Path  # a CA that signed nothing here
    trusted: ssl.SSLContext  # a test client's context trusting ``ca``

    def env(self) -> dict[str, str]:
        """The settings that make a part serve HTTPS with the certificate and verify the
        others against the CA."""
        return {
            "PERSO_TLS_CERT_FILE": str(self.cert),
            "PERSO_TLS_KEY_FILE": str(self.key),
            "PERSO_TLS_CA_FILE": str(self.ca),
        }


def make_pki(directory: Path) -> Pki:
    """A CA and the loopback certificate it signs, written to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    paths = {name: directory / f"{name}.pem" for name in ("ca", "cert", "key", "other")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    issued.private_key_pem.write_to_path(str(paths["key"]))
    with paths["cert"].open("wb") as out:
        for blob in issued.cert_chain_pems:
            out.write(blob.bytes())
    trustme.CA().cert_pem.write_to_path(str(paths["other"]))
    trusted = ssl.create_default_context(cafile=str(paths["ca"]))
    return Pki(paths["ca"], paths["cert"], paths["key"], paths["other"], trusted)
