"""Certificates for the TLS tests: a CA, a server certificate for 127.0.0.1 / localhost, a client
certificate, and a client certificate from a CA nobody trusts, written as PEM files.

Keys are PKCS#8 ("BEGIN PRIVATE KEY"), the only form Apache's Netty reads, so the same files
serve pyrmq, the Apache reference and the Java client.  trustme writes traditional keys; they are
re-encoded here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path      # signed by a CA the server does not trust
    stranger_key: Path


def _pkcs8(pem: bytes, password: bytes | None = None) -> bytes:
    key = serialization.load_pem_private_key(pem, None)
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def write_key(leaf: trustme.LeafCert, path: Path, password: bytes | None = None) -> Path:
    path.write_bytes(_pkcs8(leaf.private_key_pem.bytes(), password))
    return path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, stranger_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example")
    stranger = stranger_ca.issue_cert("stranger.example")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    for name, leaf in (("server", server), ("client", client), ("stranger", stranger)):
        leaf.cert_chain_pems[0].write_to_path(str(directory / f"{name}.pem"))
        write_key(leaf, directory / f"{name}.key")
    return Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key",
               directory / "client.pem", directory / "client.key",
               directory / "stranger.pem", directory / "stranger.key")
