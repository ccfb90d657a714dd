"""TLS settings under Apache's names: defaults, the tls.config.file overlay, what decides a
broker's outgoing TLS, and the settings refused at start (with the key named)."""

from __future__ import annotations

import logging
import ssl

import pytest

from pyrmq.broker.config import ConfigError, build_config
from pyrmq.cli import main as cli_main
from pyrmq.namesrv.controller import NamesrvConfig
from pyrmq.remoting.tls_config import ClientAuth, TlsConfig, TlsConfigError, TlsMode, tls_config_from_properties
from pyrmq.remoting.tls_context import client_ssl_context, server_ssl_context
from tests.tls_pki import make_pki, write_key


def _props(tmp_path, **keys: str) -> dict[str, str]:
    # never the machine's /etc/rocketmq/tls.properties
    return {"tls.config.file": str(tmp_path / "absent.properties"), **keys}


def test_defaults_are_apaches(tmp_path):
    config = tls_config_from_properties(_props(tmp_path))
    assert config.server_mode is TlsMode.PERMISSIVE
    assert config.test_mode_enable is True
    assert config.server_need_client_auth is ClientAuth.NONE
    assert config.use_tls is False
    assert TlsConfig().config_file == "/etc/rocketmq/tls.properties"


def test_tls_config_file_overrides_all_but_mode_and_enable(tmp_path, caplog):
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text("# as Apache's docs write it\n"
                        "tls.test.mode.enable=false\n"
                        "tls.server.need.client.auth=require\n"
                        "tls.server.certPath=/from/file.pem\n"
                        "tls.client.authServer=true\n"
                        "tls.server.mode=disabled\n")
    config = tls_config_from_properties({"tls.config.file": str(tls_file), "tls.server.mode": "enforcing",
                                         "tls.server.certPath": "/from/broker.pem", "tls.server.keyPath": "/k.pem",
                                         "tls.test.mode.enable": "true"})
    assert config.server_mode is TlsMode.ENFORCING          # only from the role's own file
    assert config.server_cert_path == "/from/file.pem"      # the tls.config.file wins, as in Apache
    assert config.server_key_path == "/k.pem"
    assert config.test_mode_enable is False
    assert config.server_need_client_auth is ClientAuth.REQUIRE
    assert config.client_auth_server is True
    assert any("tls.server.mode has no effect in a tls.config.file" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("keys, use_tls", [
    ({}, False),
    ({"tls.server.mode": "enforcing"}, True),             # Apache: tls.enable defaults to "enforcing"
    ({"tls.server.mode": "enforcing", "tls.enable": "false"}, False),
    ({"tls.enable": "true"}, True),
    ({"tls.enable": "false", "useTLS": "true"}, True),    # broker.conf's NettyClientConfig key wins
])
def test_what_decides_outgoing_tls(tmp_path, keys, use_tls):
    assert tls_config_from_properties(_props(tmp_path, **keys)).use_tls is use_tls


@pytest.mark.parametrize("key, value", [
    ("tls.server.mode", "enforcng"),          # Apache: permissive, silently
    ("tls.server.need.client.auth", "requires"),   # Apache: none, silently
    ("tls.test.mode.enable", "yes"),
    ("tls.enable", "1"),
])
def test_values_apache_would_misread_are_refused(tmp_path, key, value):
    with pytest.raises(TlsConfigError, match=key.replace(".", r"\.")):
        tls_config_from_properties(_props(tmp_path, **{key: value}))


def test_modes_are_case_insensitive(tmp_path):
    assert tls_config_from_properties(_props(tmp_path, **{"tls.server.mode": "Enforcing"})).server_mode \
        is TlsMode.ENFORCING


def test_broker_conf_carries_the_tls_keys_without_unknown_key_warnings(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    loaded = build_config(_props(tmp_path, **{"storePathRootDir": str(tmp_path / "s"), "tls.server.mode": "disabled",
                                              "useTLS": "true"}))
    assert loaded.tls.server_mode is TlsMode.DISABLED and loaded.tls.use_tls
    assert not [r for r in caplog.records if "unknown key" in r.getMessage()]
    with pytest.raises(ConfigError, match="tls.server.mode"):
        build_config(_props(tmp_path, **{"tls.server.mode": "strict"}))


def test_namesrv_conf(tmp_path):
    config = NamesrvConfig.from_properties(_props(tmp_path, listenPort="19876", **{"tls.server.mode": "enforcing"}))
    assert config.listen_port == 19876 and config.tls.server_mode is TlsMode.ENFORCING


def test_cli_refuses_to_start_without_a_certificate_outside_test_mode(tmp_path, capsys):
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"tls.config.file={tmp_path / 'absent'}\ntls.server.mode=enforcing\ntls.test.mode.enable=false\n")
    assert cli_main(["namesrv", "-c", str(conf), "--port", "0", "--bind", "127.0.0.1"]) == 2
    assert "needs tls.server.certPath and tls.server.keyPath" in capsys.readouterr().err


# --- contexts -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server(pki, **changes) -> TlsConfig:
    base = dict(server_mode=TlsMode.ENFORCING, test_mode_enable=False, server_cert_path=str(pki.server_cert),
                server_key_path=str(pki.server_key))
    base.update(changes)
    return TlsConfig(**base)


def test_encrypted_key_with_its_password(pki, tmp_path):
    import trustme
    leaf = trustme.CA().issue_cert("127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    key = write_key(leaf, tmp_path / "c.key", password=b"123456")
    assert b"ENCRYPTED PRIVATE KEY" in key.read_bytes()
    config = _server(pki, server_cert_path=str(tmp_path / "c.pem"), server_key_path=str(key),
                     server_key_password="123456")
    assert isinstance(server_ssl_context(config), ssl.SSLContext)
    with pytest.raises(TlsConfigError, match="cannot load"):
        server_ssl_context(_server(pki, server_cert_path=str(tmp_path / "c.pem"), server_key_path=str(key),
                                   server_key_password="wrong"))


@pytest.mark.parametrize("changes, message", [
    ({"server_cert_path": ""}, "needs tls.server.certPath and tls.server.keyPath"),
    ({"server_cert_path": "/nonexistent.pem"}, "no such file"),
    ({"server_need_client_auth": ClientAuth.REQUIRE}, "needs tls.server.trustCertPath"),
    ({"server_need_client_auth": ClientAuth.REQUIRE, "server_trust_cert_path": "/nonexistent"}, "cannot load"),
])
def test_unusable_server_settings_stop_the_start(pki, changes, message):
    with pytest.raises(TlsConfigError, match=message):
        server_ssl_context(_server(pki, **changes))


def test_client_auth_modes(pki):
    assert server_ssl_context(_server(pki)).verify_mode is ssl.CERT_NONE
    trusted = {"server_trust_cert_path": str(pki.ca)}
    assert server_ssl_context(_server(pki, server_need_client_auth=ClientAuth.OPTIONAL, **trusted)).verify_mode \
        is ssl.CERT_OPTIONAL
    assert server_ssl_context(_server(pki, server_need_client_auth=ClientAuth.REQUIRE, **trusted)).verify_mode \
        is ssl.CERT_REQUIRED
    # optional without a trust file: nothing can be checked, so nothing is asked for
    assert server_ssl_context(_server(pki, server_need_client_auth=ClientAuth.OPTIONAL)).verify_mode is ssl.CERT_NONE


def test_client_context_trust(pki):
    assert client_ssl_context(TlsConfig()).verify_mode is ssl.CERT_NONE           # test mode trusts anyone
    assert client_ssl_context(TlsConfig(test_mode_enable=False)).verify_mode is ssl.CERT_NONE   # authServer=false
    strict = client_ssl_context(TlsConfig(test_mode_enable=False, client_auth_server=True,
                                          client_trust_cert_path=str(pki.ca)))
    assert strict.verify_mode is ssl.CERT_REQUIRED and not strict.check_hostname
