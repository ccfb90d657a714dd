"""``ssl.SSLContext`` objects from a ``TlsConfig``, with Apache's meanings (its TlsHelper):

- server, test mode (Apache's default): a self-signed certificate made at start; the configured
  certificate and key are ignored (a warning says so), no client certificate is asked for;
- server, otherwise: ``tls.server.certPath`` + ``tls.server.keyPath`` (PEM; the key may be
  encrypted with ``tls.server.keyPassword``); client certificates per
  ``tls.server.need.client.auth``, checked against ``tls.server.trustCertPath``;
- client, test mode or ``tls.client.authServer=false``: any server certificate is accepted;
  otherwise it must chain to ``tls.client.trustCertPath`` (or the system's CAs).  Host names are
  not checked (Netty's client does not either).  A client certificate is shown when
  ``tls.client.certPath`` is set (not in test mode).

One deviation, because Python's ``ssl`` cannot accept a client certificate without checking it:
Apache with ``tls.server.authClient=false`` accepts any client certificate it asked for; pyrmq
checks every client certificate against ``tls.server.trustCertPath``.  ``require`` without a
trust file is therefore refused at start, and ``optional`` without one asks for no certificate.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import ssl
import tempfile
from pathlib import Path
from typing import Final

from pyrmq.remoting.tls_config import ClientAuth, TlsConfig, TlsConfigError

log = logging.getLogger(__name__)

# How long the test-mode certificate is valid: it lives only as long as the process.
SELF_SIGNED_VALIDITY: Final = datetime.timedelta(days=3650)
SELF_SIGNED_NAME: Final = "localhost"


def server_ssl_context(config: TlsConfig) -> ssl.SSLContext:
    """The context a TLS listener hands to ``trio.SSLStream``.  Raises ``TlsConfigError``."""
    if config.test_mode_enable:
        if config.server_cert_path or config.server_key_path:
            log.warning("tls.test.mode.enable=true: tls.server.certPath / keyPath are ignored and a self-signed "
                        "certificate is served, as Apache does; set tls.test.mode.enable=false to use them")
        return self_signed_server_context()
    if not (config.server_cert_path and config.server_key_path):
        raise TlsConfigError("tls.test.mode.enable=false needs tls.server.certPath and tls.server.keyPath "
                             "(PEM certificate chain and private key)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_key_pair(ctx, "tls.server", config.server_cert_path, config.server_key_path, config.server_key_password)
    auth = config.server_need_client_auth
    if auth is ClientAuth.NONE:
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if config.server_trust_cert_path:
        _load_trust(ctx, "tls.server.trustCertPath", config.server_trust_cert_path)
    elif config.server_auth_client:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)   # Apache: the JDK's default trust store
    elif auth is ClientAuth.REQUIRE:
        raise TlsConfigError("tls.server.need.client.auth=require needs tls.server.trustCertPath: pyrmq checks "
                             "every client certificate against it (Apache with authClient=false checks none)")
    else:
        log.warning("tls.server.need.client.auth=optional without tls.server.trustCertPath: no client "
                    "certificate is asked for (pyrmq cannot accept one it does not check)")
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx.verify_mode = ssl.CERT_REQUIRED if auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
    return ctx


def client_ssl_context(config: TlsConfig) -> ssl.SSLContext:
    """The context of a broker's outgoing TLS connections.  Raises ``TlsConfigError``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if config.test_mode_enable or not config.client_auth_server:
        ctx.verify_mode = ssl.CERT_NONE
    elif config.client_trust_cert_path:
        _load_trust(ctx, "tls.client.trustCertPath", config.client_trust_cert_path)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if not config.test_mode_enable and (config.client_cert_path or config.client_key_path):
        _load_key_pair(ctx, "tls.client", config.client_cert_path, config.client_key_path,
                       config.client_key_password)
    return ctx


def _load_key_pair(ctx: ssl.SSLContext, prefix: str, cert_path: str, key_path: str, password: str) -> None:
    if not (cert_path and key_path):
        raise TlsConfigError(f"{prefix}.certPath and {prefix}.keyPath go together")
    try:
        ctx.load_cert_chain(cert_path, key_path, password or None)
    except FileNotFoundError as exc:
        raise TlsConfigError(f"{prefix}.certPath / keyPath: {exc.filename}: no such file") from None
    except (OSError, ssl.SSLError) as exc:
        # Wrong password, a key that does not match the certificate, not PEM.
        raise TlsConfigError(f"{prefix}.certPath={cert_path} / keyPath={key_path}: cannot load: {exc}") from None


def _load_trust(ctx: ssl.SSLContext, key: str, path: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"{key}={path}: cannot load: {exc}") from None


@functools.cache
def self_signed_server_context() -> ssl.SSLContext:
    """Test mode's server context: one self-signed certificate per process, made on first use."""
    cert_pem, key_pem = _self_signed_pem()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.verify_mode = ssl.CERT_NONE
    # ssl loads certificates from files only: a private directory for the moment of loading.
    with tempfile.TemporaryDirectory(prefix="pyrmq-tls-") as tmp:
        cert_file, key_file = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert_file.write_bytes(cert_pem)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key_pem)
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def _self_signed_pem() -> tuple[bytes, bytes]:
    # cryptography only here: the stdlib can load certificates but not make them.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())   # P-256: fast to make, every TLS client knows it
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SELF_SIGNED_NAME)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + SELF_SIGNED_VALIDITY)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(SELF_SIGNED_NAME)]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
