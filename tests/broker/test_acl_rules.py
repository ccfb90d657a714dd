"""ACL rules without sockets: plain_acl.yml parsing, permissions, the validator's decisions and
remarks (Apache 4.9.7's messages), the Java HashMap order of refused resources."""

from __future__ import annotations

import pytest

from pyrmq.broker.acl.plain_config import DENY, PUB, SUB, AclConfigError, parse_perm, parse_plain_acl
from pyrmq.broker.acl.resources import AclDenied, java_hash_order, needed_resources
from pyrmq.broker.acl.validator import AclValidator, check_permission
from pyrmq.codec import fastjson
from pyrmq.codec.codes import RequestCode
from pyrmq.codec.remoting import make_request
from pyrmq.common.acl.signature import sign_ext_fields

ACL_YAML = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicP=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: adminUser
    secretKey: adminSecret
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
HOST = "127.0.0.1"


def signed(code, fields, body=None, ak="RocketMQ", sk="12345678"):
    return make_request(code, sign_ext_fields(fields, body, ak, sk), body)


def send(topic, ak="RocketMQ", sk="12345678", code=RequestCode.SEND_MESSAGE_V2, group="pg"):
    return signed(code, {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0"}, b"body", ak, sk)


def pull(topic, group, ak="RocketMQ", sk="12345678"):
    return signed(RequestCode.PULL_MESSAGE, {"consumerGroup": group, "topic": topic, "queueId": "0",
                                             "queueOffset": "0"}, None, ak, sk)


@pytest.fixture
def validator():
    return AclValidator(parse_plain_acl(ACL_YAML))


def refusal(validator, request, host=HOST) -> str | None:
    try:
        validator.validate(request, host)
    except AclDenied as exc:
        return str(exc)
    return None


def test_parse_accounts():
    config = parse_plain_acl(ACL_YAML)
    user = config.accounts["RocketMQ"]
    assert user.secret_key == "12345678"          # an int in YAML, a string to Apache
    assert not user.admin and user.default_topic_perm == DENY and user.default_group_perm == SUB
    assert user.resource_perms == {"%RETRY%groupA": DENY, "%RETRY%groupB": PUB | SUB, "topicA": DENY,
                                   "topicB": PUB | SUB, "topicC": SUB, "topicP": PUB}
    admin = config.accounts["adminUser"]
    assert admin.admin and admin.resource_perms is None and admin.default_topic_perm == DENY
    assert admin.white_remote_address.matches("192.168.1.7")
    assert "adminSecret" not in repr(admin)


def test_parse_perm_words():
    assert parse_perm("PUB") == PUB and parse_perm(" SUB|PUB ") == PUB | SUB and parse_perm(None) == DENY
    assert parse_perm("READ") == DENY


@pytest.mark.parametrize(("text", "fragment"), [
    ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "longer than 6"),
    ("accounts:\n  - secretKey: 12345678\n", "required"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [topicA]\n", "resource=PERM"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 1.2.3\n", "1.2.3"),
    ("globalWhiteRemoteAddresses: 10.0.0.1\n", "must be a list"),
    ("accounts: [", "not valid YAML"),
    ("- a\n- b\n", "top level"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: maybe\n", "true or false"),
    ("accounts:\n  - accessKey: !!python/object:os.system {}\n", "not valid YAML"),
])
def test_broken_files_are_refused(text, fragment):
    with pytest.raises(AclConfigError) as info:
        parse_plain_acl(text)
    assert fragment in str(info.value)


def test_empty_file_and_repeated_key():
    assert parse_plain_acl("").accounts == {}
    config = parse_plain_acl("accounts:\n  - {accessKey: RocketMQ, secretKey: first111}\n"
                             "  - {accessKey: RocketMQ, secretKey: second22}\n")
    assert config.accounts["RocketMQ"].secret_key == "first111"


def test_check_permission_table():
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(SUB, DENY | SUB)
    assert check_permission(2, PUB) and not check_permission(2, DENY)   # ANY


def test_allowed_requests(validator):
    assert refusal(validator, send("topicB")) is None
    assert refusal(validator, send("topicP")) is None
    assert refusal(validator, pull("topicB", "groupB")) is None
    assert refusal(validator, pull("topicC", "anyGroup")) is None            # default group perm SUB
    assert refusal(validator, send("%RETRY%groupB", group="groupB")) is None  # retry topic: the group's perm
    assert refusal(validator, send("RMQ_SYS_TRACE_TOPIC")) is None           # trace topic, default DENY


def test_refusals_carry_apaches_messages(validator):
    assert refusal(validator, send("topicA")) == "No default permission for topic:topicA"
    assert refusal(validator, send("topicC")) == "No default permission for topic:topicC"    # SUB only
    assert refusal(validator, send("other")) == "No default permission for topic:other"       # default DENY
    assert refusal(validator, pull("topicP", "groupB")) == "No default permission for topic:topicP"
    assert refusal(validator, pull("topicB", "groupA")) == "No default permission for group:groupA"
    assert refusal(validator, send("topicB", sk="wrongSecret")) == "Check signature failed for accessKey=RocketMQ"
    assert refusal(validator, send("topicB", ak="nobody1")) == "No acl config for nobody1"
    assert refusal(validator, make_request(RequestCode.SEND_MESSAGE_V2, {"b": "topicB"})) == "No accessKey is configured"
    create = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "topicB"})
    assert refusal(validator, create) == "Need admin permission for request code=17, but accessKey=RocketMQ is not"


def test_batch_and_lite_pull_are_checked(validator):
    assert refusal(validator, send("topicA", code=RequestCode.SEND_BATCH_MESSAGE)) == \
        "No default permission for topic:topicA"
    lite = signed(RequestCode.LITE_PULL_MESSAGE, {"consumerGroup": "g", "topic": "topicP"})
    assert refusal(validator, lite) == "No default permission for topic:topicP"


def test_admin_account(validator):
    create = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, ak="adminUser", sk="adminSecret")
    assert refusal(validator, create) is None
    assert refusal(validator, send("topicA", ak="adminUser", sk="adminSecret")) is None   # no perms listed: all
    # From its white address the account needs no signature at all (Apache's rule).
    unsigned = make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x", "AccessKey": "adminUser"})
    assert refusal(validator, unsigned, host="192.168.1.20") is None
    assert refusal(validator, unsigned) == "Check signature failed for accessKey=adminUser"


def test_global_white_address_passes_everything(validator):
    assert refusal(validator, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}), "10.10.103.5") is None
    assert refusal(validator, make_request(RequestCode.UPDATE_AND_CREATE_TOPIC, None), "10.10.103.5") is None


def test_tampered_request_fails_the_signature(validator):
    request = send("topicB")
    request.ext_fields["b"] = "topicA"
    assert refusal(validator, request) == "Check signature failed for accessKey=RocketMQ"
    request = send("topicB")
    request.body = b"other body"
    assert refusal(validator, request) == "Check signature failed for accessKey=RocketMQ"


def test_query_message_signed_with_the_unique_key_flag(validator):
    fields = {"topic": "topicB", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1",
              "_UNIQUE_KEY_QUERY": "false"}
    assert refusal(validator, signed(RequestCode.QUERY_MESSAGE, fields)) is None
    bad = signed(RequestCode.QUERY_MESSAGE, fields)
    bad.ext_fields["_UNIQUE_KEY_QUERY"] = "true"    # the flag is covered by the clients' signature
    assert refusal(validator, bad) == "Check signature failed for accessKey=RocketMQ"


def test_heart_beat_needs_sub_on_groups_and_subscriptions(validator):
    def beat(group, topic):
        body = fastjson.dumps({"clientID": "c", "consumerDataSet": [{
            "groupName": group, "subscriptionDataSet": [{"topic": topic}, {"topic": f"%RETRY%{group}"}]}],
            "producerDataSet": [{"groupName": "pg"}]}).encode()
        return signed(RequestCode.HEART_BEAT, {}, body)
    assert refusal(validator, beat("groupB", "topicC")) is None
    assert refusal(validator, beat("groupB", "topicP")) == "No default permission for topic:topicP"
    assert refusal(validator, beat("groupA", "topicC")) == "No default permission for group:groupA"
    assert refusal(validator, signed(RequestCode.HEART_BEAT, {}, b"{not json")).startswith("heartbeat body")


def test_header_fields_apache_decodes_are_required(validator):
    request = signed(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "groupB", "topic": "topicB"})
    assert refusal(validator, request) == "the custom field <queueId> is null"
    assert refusal(validator, signed(RequestCode.UNREGISTER_CLIENT, {})) == "the custom field <clientID> is null"


def test_java_hash_order():
    # java.util.HashMap<String,Byte> iteration order, printed by a JVM for these insertions.
    assert java_hash_order(["topicB", "%RETRY%groupA"]) == ["topicB", "%RETRY%groupA"]
    assert java_hash_order(["a", "b", "c"]) == ["a", "b", "c"]
    assert java_hash_order(["zeta", "alpha", "%RETRY%g1", "T_x_1", "mid"]) == \
        ["zeta", "T_x_1", "alpha", "mid", "%RETRY%g1"]
    # 20 keys: the map has grown to 32 buckets
    assert java_hash_order([f"t{i}" for i in range(20)]) == \
        "t4,t5,t6,t7,t8,t9,t10,t12,t11,t14,t13,t16,t15,t18,t17,t0,t1,t19,t2,t3".split(",")


def test_needed_resources_order_follows_java(validator):
    request = pull("topicB", "groupA")
    assert list(needed_resources(request)) == java_hash_order(["topicB", "%RETRY%groupA"])


def test_where_plain_acl_yml_is_read(tmp_path, monkeypatch):
    from pyrmq.broker.config import ConfigError, build_config, load_config_file

    conf = tmp_path / "etc" / "broker.conf"
    conf.parent.mkdir()
    conf.write_text("aclEnable=true\n")
    assert load_config_file(str(conf)).plain_acl_file == tmp_path / "etc" / "plain_acl.yml"
    conf.write_text("aclEnable=true\naclPlainFile=acl/rules.yml\n")
    assert load_config_file(str(conf)).plain_acl_file == tmp_path / "etc" / "acl" / "rules.yml"
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path / "home"))
    assert build_config({"aclEnable": "true"}).plain_acl_file == tmp_path / "home" / "conf" / "plain_acl.yml"
    monkeypatch.delenv("ROCKETMQ_HOME")
    with pytest.raises(ConfigError, match="aclEnable=true needs plain_acl.yml"):
        _ = build_config({"aclEnable": "true"}).plain_acl_file


def test_any_changed_character_or_byte_is_refused(validator):
    """10,000 signed sends, each with one character of one signed value or one body byte
    changed: every one fails the signature (the secret is the only way to re-sign)."""
    import random

    rng = random.Random(7)
    base = send("topicB")
    signed_names = sorted(k for k in base.ext_fields if k != "Signature")
    for _ in range(10_000):
        request = make_request(base.code, dict(base.ext_fields), bytes(base.body))
        if rng.random() < 0.3:
            body = bytearray(request.body)
            body[rng.randrange(len(body))] ^= rng.randrange(1, 256)
            request.body = bytes(body)
        else:
            name = rng.choice(signed_names)
            value = request.ext_fields[name]
            i = rng.randrange(len(value))
            replacement = rng.choice([c for c in "abcXYZ019%|-_é" if c != value[i]])
            request.ext_fields[name] = value[:i] + replacement + value[i + 1:]
        assert refusal(validator, request) in ("Check signature failed for accessKey=RocketMQ",
                                               "No acl config for " + request.ext_fields["AccessKey"])
