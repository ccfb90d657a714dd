"""TLS settings under Apache RocketMQ 4.9's property names (its TlsSystemConfig).

Apache reads them as JVM system properties (``-Dtls.server.mode=enforcing``) and then lets the file
named by ``tls.config.file`` (default ``/etc/rocketmq/tls.properties``) override every key but
``tls.server.mode``, ``tls.enable`` and ``tls.config.file`` itself.  pyrmq has no system
properties: the same keys are read from the role's own config file (broker.conf, namesrv.conf),
and the ``tls.config.file`` overlay works as in Apache.  ``useTLS`` (Apache's NettyClientConfig key
in broker.conf) decides the broker's outgoing connections, as ``tls.enable`` does without it.

Where pyrmq is stricter than Apache (both refuse to start rather than run with a setting that
does not mean what it says): an unknown ``tls.server.mode`` or ``tls.server.need.client.auth``
value, or a boolean that is not true/false, is an error (Apache falls back to permissive / none /
false silently).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pyrmq.codec.java_properties import parse_properties

log = logging.getLogger(__name__)


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used; the message names the key."""


class TlsMode(enum.Enum):
    """What a listener does with TLS (Apache's TlsMode): refused, optional, or required."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    """Whether a TLS server asks for client certificates (Netty's ClientAuth)."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


# Apache's defaults: /etc/rocketmq/tls.properties, permissive, test mode on.
DEFAULT_TLS_CONFIG_FILE: Final = "/etc/rocketmq/tls.properties"

# Property name -> TlsConfig field, for the keys the tls.config.file may set (Apache's
# TlsHelper.extractTlsConfigFromFile reads exactly these).
FILE_KEYS: Final = {
    "tls.test.mode.enable": "test_mode_enable",
    "tls.server.need.client.auth": "server_need_client_auth",
    "tls.server.keyPath": "server_key_path",
    "tls.server.keyPassword": "server_key_password",
    "tls.server.certPath": "server_cert_path",
    "tls.server.authClient": "server_auth_client",
    "tls.server.trustCertPath": "server_trust_cert_path",
    "tls.client.keyPath": "client_key_path",
    "tls.client.keyPassword": "client_key_password",
    "tls.client.certPath": "client_cert_path",
    "tls.client.authServer": "client_auth_server",
    "tls.client.trustCertPath": "client_trust_cert_path",
}
# Only from the role's config file (Apache: only from system properties).
MODE_KEY: Final = "tls.server.mode"
ENABLE_KEY: Final = "tls.enable"
CONFIG_FILE_KEY: Final = "tls.config.file"
USE_TLS_KEY: Final = "useTLS"      # NettyClientConfig.useTLS in broker.conf


def is_tls_key(key: str) -> bool:
    """A key this module reads (the config loaders leave these to it)."""
    return key.startswith("tls.") or key == USE_TLS_KEY


@dataclass(frozen=True)
class TlsConfig:
    server_mode: TlsMode = TlsMode.PERMISSIVE
    # Outgoing connections of a broker (registration with the NameServers) use TLS.
    use_tls: bool = False
    config_file: str = DEFAULT_TLS_CONFIG_FILE
    # Apache's test mode: the server serves a self-signed certificate made at start (and ignores
    # the configured one); a client trusts any server and shows no certificate.
    test_mode_enable: bool = True
    server_need_client_auth: ClientAuth = ClientAuth.NONE
    server_key_path: str = ""
    server_key_password: str = ""
    server_cert_path: str = ""
    server_auth_client: bool = False
    server_trust_cert_path: str = ""
    client_key_path: str = ""
    client_key_password: str = ""
    client_cert_path: str = ""
    client_auth_server: bool = False
    client_trust_cert_path: str = ""

    def describe(self) -> str:
        """One log line, without the key passwords."""
        if self.server_mode is TlsMode.DISABLED:
            return "TLS disabled"
        cert = "a self-signed test certificate" if self.test_mode_enable else self.server_cert_path
        return (f"TLS {self.server_mode.value} with {cert}, client certificates "
                f"{'not asked for' if self.test_mode_enable else self.server_need_client_auth.value}")


def _bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise TlsConfigError(f"{key}={raw!r}: expected true or false")
    return value == "true"


def _enum(key: str, raw: str, typ: type[TlsMode] | type[ClientAuth]) -> TlsMode | ClientAuth:
    value = raw.strip().lower()
    for member in typ:
        if member.value == value:
            return member
    choices = " | ".join(m.value for m in typ)
    raise TlsConfigError(f"{key}={raw!r}: expected {choices}")


def _file_values(props: Mapping[str, str], where: str) -> dict[str, object]:
    values: dict[str, object] = {}
    for key, raw in props.items():
        name = FILE_KEYS.get(key)
        if name is None:
            continue
        if name == "server_need_client_auth":
            values[name] = _enum(key, raw, ClientAuth)
        elif name in ("test_mode_enable", "server_auth_client", "client_auth_server"):
            values[name] = _bool(key, raw)
        else:
            values[name] = raw.strip()
    unknown = [k for k in props if k.startswith("tls.") and k not in FILE_KEYS
               and k not in (MODE_KEY, ENABLE_KEY, CONFIG_FILE_KEY)]
    for key in unknown:
        log.warning("%s: unknown TLS key %s ignored", where, key)
    return values


def read_tls_file(path: str) -> dict[str, str] | None:
    """The file's properties, or None when it is not a readable file (Apache skips it then)."""
    file = Path(path)
    try:
        if not file.is_file():
            return None
        return parse_properties(file.read_text("utf-8"))
    except OSError as exc:
        log.info("TLS config file %s not read: %s", path, exc)
        return None
    except UnicodeDecodeError as exc:
        raise TlsConfigError(f"{CONFIG_FILE_KEY}={path}: not UTF-8 text ({exc})") from None


def tls_config_from_properties(props: Mapping[str, str], where: str = "config") -> TlsConfig:
    """The settings of a role whose config file holds ``props``, with the ``tls.config.file``
    overlay applied.  Raises ``TlsConfigError``."""
    mode = _enum(MODE_KEY, props[MODE_KEY], TlsMode) if props.get(MODE_KEY, "").strip() else TlsMode.PERMISSIVE
    assert isinstance(mode, TlsMode)
    # Apache: useTLS from broker.conf, else -Dtls.enable, else "the server enforces TLS".
    if props.get(USE_TLS_KEY, "").strip():
        use_tls = _bool(USE_TLS_KEY, props[USE_TLS_KEY])
    elif props.get(ENABLE_KEY, "").strip():
        use_tls = _bool(ENABLE_KEY, props[ENABLE_KEY])
    else:
        use_tls = mode is TlsMode.ENFORCING
    config_file = props.get(CONFIG_FILE_KEY, "").strip() or DEFAULT_TLS_CONFIG_FILE
    values = _file_values(props, where)
    overlay = read_tls_file(config_file)
    if overlay is not None:
        for key in (MODE_KEY, ENABLE_KEY, CONFIG_FILE_KEY, USE_TLS_KEY):
            if key in overlay:
                log.warning("%s: %s has no effect in a tls.config.file (as in Apache); set it in %s",
                            config_file, key, where)
        values.update(_file_values(overlay, config_file))
    return TlsConfig(server_mode=mode, use_tls=use_tls, config_file=config_file, **values)  # type: ignore[arg-type]
