"""The ACL admin requests (codes 50-54) against a running broker with aclEnable=true and a real
plain_acl.yml: changes are written to the file and apply at once (the watcher, polling all the
while, never reloads the broker's own writes), bad values and foreign file paths leave the file untouched, concurrent changes all
land, and a broker without ACL answers the failure codes with a clear remark."""

from __future__ import annotations

import json

import pytest
import trio
import yaml

from pyrmq.broker.acl.admin import ACL_DISABLED_REMARK
from pyrmq.broker.acl.plain_writer import AccountUpdate, java_split, upsert_account
from pyrmq.codec.codes import RequestCode, ResponseCode
from pyrmq.codec.remoting import make_request
from tests.broker import test_acl_broker
from tests.broker.test_acl_broker import EXCEPTION, send_request, signed

# the broker of test_acl_broker: its plain_acl.yml, its watcher polling every 100 ms
acl_file = test_acl_broker.acl_file
broker_overrides = test_acl_broker.broker_overrides
ADMIN = {"ak": "admin007", "sk": "admin-secret"}


def update_account(access_key, secret_key, credentials=ADMIN, **fields):
    header = {"accessKey": access_key, "secretKey": secret_key, "admin": "false", **fields}
    return signed(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {k: v for k, v in header.items() if v is not None},
                  **credentials)


def delete_account(access_key):
    return signed(RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key}, **ADMIN)


def update_white(addresses, path=None):
    header = {"globalWhiteAddrs": addresses}
    if path is not None:
        header["aclFileFullPath"] = path
    return signed(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header, **ADMIN)


def document(path):
    return yaml.safe_load(path.read_text())


async def test_create_update_delete_apply_at_once_and_shape_the_file_as_apache(cluster, acl_file):
    c, addr = cluster.client, cluster.broker_addr
    watcher = cluster.broker.acl_watcher
    acl_file.chmod(0o600)
    with trio.fail_after(20):
        created = await c.invoke(addr, update_account("newUser01", "newSecret01", defaultTopicPerm="DENY",
                                                      topicPerms="aclTopic=PUB,other=SUB", groupPerms="g1=SUB"))
        assert (created.code, created.remark) == (ResponseCode.SUCCESS, None)
        assert (await c.invoke(addr, send_request("aclTopic", ak="newUser01", sk="newSecret01"))).code == \
            ResponseCode.SUCCESS
        refused = await c.invoke(addr, send_request("other", ak="newUser01", sk="newSecret01"))
        assert refused.remark == EXCEPTION + "No default permission for topic:other"

        # An update keeps the keys it does not name and moves the account to the end.
        updated = await c.invoke(addr, update_account("producer1", "producer-secret2", whiteRemoteAddress="10.1.1.*",
                                                      topicPerms="aclTopic=SUB"))
        assert updated.code == ResponseCode.SUCCESS, updated.remark
        doc = document(acl_file)
        assert acl_file.stat().st_mode & 0o777 == 0o600   # it holds secrets: the operator's mode stays
        assert list(doc) == ["accounts", "dataVersion"]
        assert [a["accessKey"] for a in doc["accounts"]] == ["admin007", "newUser01", "producer1"]
        assert list(doc["accounts"][1].items()) == [
            ("accessKey", "newUser01"), ("secretKey", "newSecret01"), ("admin", False), ("defaultTopicPerm", "DENY"),
            ("topicPerms", ["aclTopic=PUB", "other=SUB"]), ("groupPerms", ["g1=SUB"])]
        assert list(doc["accounts"][2].items()) == [
            ("accessKey", "producer1"), ("secretKey", "producer-secret2"), ("defaultTopicPerm", "DENY"),
            ("defaultGroupPerm", "DENY"), ("topicPerms", ["aclTopic=SUB"]), ("groupPerms", ["aclGroup=SUB"]),
            ("whiteRemoteAddress", "10.1.1.*"), ("admin", False)]
        assert [v["counter"] for v in doc["dataVersion"]] == [2]
        old_secret = await c.invoke(addr, send_request("aclTopic"))
        assert old_secret.remark == EXCEPTION + "Check signature failed for accessKey=producer1"

        deleted = await c.invoke(addr, delete_account("newUser01"))
        assert deleted.code == ResponseCode.SUCCESS, deleted.remark
        gone = await c.invoke(addr, send_request("aclTopic", ak="newUser01", sk="newSecret01"))
        assert gone.remark == EXCEPTION + "No acl config for newUser01"
        again = await c.invoke(addr, delete_account("newUser01"))
        assert (again.code, again.remark) == (
            ResponseCode.DELETE_ACL_CONFIG_FAILED,
            "The accesskey[newUser01] corresponding to accessConfig has been deleted failed.")
        assert [a["accessKey"] for a in document(acl_file)["accounts"]] == ["admin007", "producer1"]

        # Our own writes are not read back as foreign changes.
        assert not await watcher.poll_once()
        assert watcher.reloads == 0

        info = await c.invoke(addr, signed(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, **ADMIN))
        assert info.code == ResponseCode.SUCCESS
        version = document(acl_file)["dataVersion"][0]
        assert version["counter"] == 3
        assert json.loads(info.ext_fields["version"]) == version
        assert json.loads(info.ext_fields["allAclFileVersion"]) == {str(acl_file): version}
        assert (info.ext_fields["brokerName"], info.ext_fields["brokerAddr"], info.ext_fields["clusterName"]) == (
            "broker-a", addr, "DefaultCluster")

        config = await c.invoke(addr, signed(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, **ADMIN))
        assert config.code == ResponseCode.SUCCESS
        assert config.body == (
            b'{"globalWhiteAddrs":[],"plainAccessConfigs":['
            b'{"accessKey":"admin007","admin":true,"secretKey":"admin-secret"},'
            b'{"accessKey":"producer1","admin":false,"defaultGroupPerm":"DENY","defaultTopicPerm":"DENY",'
            b'"groupPerms":["aclGroup=SUB"],"secretKey":"producer-secret2","topicPerms":["aclTopic=SUB"],'
            b'"whiteRemoteAddress":"10.1.1.*"}]}')


@pytest.mark.parametrize(("fields", "remark"), [
    ({"accessKey": "short", "secretKey": "newSecret01"},
     "The accessKey=short and secretKey=newSecret01 cannot be null and length should longer than 6"),
    ({"accessKey": "newUser01", "secretKey": None},
     "The accessKey=newUser01 and secretKey=null cannot be null and length should longer than 6"),
    ({"accessKey": "newUser01", "secretKey": "newSecret01", "topicPerms": "aclTopic"},
     "Parse Resource format error for aclTopic.\nThe expected resource format is 'Res=Perm'. For example: topicA=SUB"),
    ({"accessKey": "newUser01", "secretKey": "newSecret01", "groupPerms": "g=ALL"},
     "Parse resource permission error for g=ALL.\n"
     "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."),
    ({"accessKey": "newUser01", "secretKey": "newSecret01", "defaultTopicPerm": "PUBSUB"},
     "defaultTopicPerm=PUBSUB is not one of DENY, PUB, SUB, PUB|SUB, SUB|PUB"),
    ({"accessKey": "newUser01", "secretKey": "newSecret01", "whiteRemoteAddress": "10.0.0.300"},
     "whiteRemoteAddress: address pattern '10.0.0.300': '10.0.0.300' is not an IP address"),
    ({"accessKey": "newUser01", "secretKey": "newSecret01", "topicPerms": " =PUB"},
     None),   # Apache would write it; the file would no longer load: refused, with the parser's words
], ids=["short-key", "no-secret", "resource-format", "resource-perm", "default-perm", "white-address",
        "blank-resource"])
async def test_bad_values_are_refused_and_leave_the_file_untouched(cluster, acl_file, fields, remark):
    before = acl_file.read_bytes()
    with trio.fail_after(10):
        header = dict(fields)
        response = await cluster.client.invoke(cluster.broker_addr, update_account(
            header.pop("accessKey"), header.pop("secretKey"), **header))
    assert response.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    if remark is None:
        assert "topicPerms entry ' =PUB' is not resource=PERM" in response.remark
    else:
        assert response.remark == remark
    assert acl_file.read_bytes() == before


async def test_global_white_addresses_and_the_file_path_is_never_taken_from_the_request(cluster, acl_file, tmp_path):
    c, addr = cluster.client, cluster.broker_addr
    other = tmp_path / "other.yml"
    other.write_text("globalWhiteRemoteAddresses: []\n")
    with trio.fail_after(20):
        for path in (str(other), "/etc/passwd", "conf/plain_acl.yml", str(acl_file.parent)):
            before = acl_file.read_bytes()
            refused = await c.invoke(addr, update_white("127.0.0.1", path))
            assert refused.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, path
            assert refused.remark == (f"aclFileFullPath={path} is not this broker's ACL file: leave it out "
                                      f"(mqadmin updateGlobalWhiteAddr without -p) or name {acl_file}")
            assert acl_file.read_bytes() == before
        assert other.read_text() == "globalWhiteRemoteAddresses: []\n"
        # the unsigned request of a peer that is not white is still refused
        unsigned = make_request(RequestCode.GET_MAX_OFFSET, {"topic": "aclTopic", "queueId": "0"})
        assert (await c.invoke(addr, unsigned)).code == ResponseCode.SYSTEM_ERROR

        bad = await c.invoke(addr, update_white("10.0.0.1,10.0.0.*-3"))
        assert bad.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED and "10.0.0.*-3" in bad.remark

        for path in (None, "", str(acl_file)):
            ok = await c.invoke(addr, update_white("10.10.104.*,10.10.105.1", path))
            assert ok.code == ResponseCode.SUCCESS, ok.remark
        assert document(acl_file)["globalWhiteRemoteAddresses"] == ["10.10.104.*", "10.10.105.1"]
        assert document(acl_file)["dataVersion"][0]["counter"] == 3
        # loopback made white: an unsigned request now passes at once
        assert (await c.invoke(addr, update_white("127.0.0.1"))).code == ResponseCode.SUCCESS
        assert (await c.invoke(addr, unsigned)).code == ResponseCode.SUCCESS


async def test_only_admin_accounts_may_send_the_acl_codes(cluster, acl_file):
    before = acl_file.read_bytes()
    user = {"ak": "producer1", "sk": "producer-secret"}
    requests = {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: update_account("newUser01", "newSecret01", credentials=user),
        RequestCode.DELETE_ACL_CONFIG: signed(RequestCode.DELETE_ACL_CONFIG, {"accessKey": "admin007"}, **user),
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO: signed(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, **user),
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: signed(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                                                             {"globalWhiteAddrs": "*"}, **user),
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: signed(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, **user),
    }
    with trio.fail_after(10):
        for code, request in requests.items():
            response = await cluster.client.invoke(cluster.broker_addr, request)
            assert (response.code, response.remark) == (
                ResponseCode.SYSTEM_ERROR,
                EXCEPTION + f"Need admin permission for request code={code}, but accessKey=producer1 is not")
    assert acl_file.read_bytes() == before


async def test_concurrent_updates_all_land(cluster, acl_file):
    count = 12

    async def create(i):
        response = await cluster.client.invoke(cluster.broker_addr, update_account(f"user{i:04d}", f"secret{i:04d}"))
        assert response.code == ResponseCode.SUCCESS, response.remark

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(create, i)
    doc = document(acl_file)
    assert sorted(a["accessKey"] for a in doc["accounts"]) == sorted(
        ["producer1", "admin007"] + [f"user{i:04d}" for i in range(count)])
    assert doc["dataVersion"][0]["counter"] == count
    accounts = cluster.broker.acl_watcher.validator.config.accounts
    assert set(accounts) == {a["accessKey"] for a in doc["accounts"]}
    assert cluster.broker.acl_watcher.validator.config.data_version.counter == count
    assert not list(acl_file.parent.glob("*.tmp"))


def test_edits_keep_apaches_key_order_and_java_split():
    doc = {"accounts": [{"accessKey": "a1234567", "secretKey": "s", "admin": True, "topicPerms": ["t=PUB"]}]}
    upsert_account(doc, AccountUpdate("a1234567", (("accessKey", "a1234567"), ("secretKey", "s2345678"),
                                                   ("admin", False))))
    assert list(doc["accounts"][0].items()) == [("accessKey", "a1234567"), ("secretKey", "s2345678"),
                                                ("admin", False), ("topicPerms", ["t=PUB"])]
    assert java_split("a,b,,", ",") == ["a", "b"]
    assert java_split(",a", ",") == ["", "a"]
    assert java_split("", ",") == [""]
    assert java_split(",,", ",") == []


class TestAclDisabled:
    @pytest.fixture
    def broker_overrides(self):
        return {}

    async def test_answers_the_failure_codes_with_a_clear_remark(self, cluster):
        expected = {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: (
                {"accessKey": "newUser01", "secretKey": "newSecret01", "admin": "false"},
                ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED),
            RequestCode.DELETE_ACL_CONFIG: ({"accessKey": "newUser01"}, ResponseCode.DELETE_ACL_CONFIG_FAILED),
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: (
                {"globalWhiteAddrs": "*"}, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED),
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ({}, ResponseCode.SYSTEM_ERROR),
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ({}, ResponseCode.SYSTEM_ERROR),
        }
        with trio.fail_after(10):
            for code, (fields, failure) in expected.items():
                response = await cluster.client.invoke(cluster.broker_addr, make_request(code, fields))
                assert (response.code, response.remark) == (failure, ACL_DISABLED_REMARK), code
