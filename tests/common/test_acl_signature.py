"""The ACL request signature, checked against what the official Java client computes."""

from __future__ import annotations

from pyrmq.common.acl.signature import (
    calculate_signature,
    sign_ext_fields,
    signature_matches,
    signed_content,
)

# Printed by rocketmq-acl 4.9.8's AclClientRPCHook (accessKey RocketMQ, secretKey 12345678) for a
# SEND_MESSAGE_V2 built with SendMessageRequestHeaderV2 and the body below.
JAVA_EXT_FIELDS = {
    "AccessKey": "RocketMQ", "a": "PG_acl", "b": "topicB", "c": "TBW102", "d": "4", "e": "1", "f": "0",
    "g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x01AC11\x02WAIT\x01true\x02TAGS\x01Täg\x02", "j": "0",
    "k": "false", "m": "false",
}
JAVA_BODY = "héllo body €".encode()
JAVA_SIGNATURE = "q2I25PAZgdnNucbpJLQ4d4/AACU="


def test_signature_of_the_java_client():
    assert calculate_signature(signed_content(JAVA_EXT_FIELDS, JAVA_BODY), "12345678") == JAVA_SIGNATURE


def test_sign_ext_fields_adds_what_the_client_adds():
    unsigned = {k: v for k, v in JAVA_EXT_FIELDS.items() if k != "AccessKey"}
    signed = sign_ext_fields(unsigned, JAVA_BODY, "RocketMQ", "12345678")
    assert signed == {**JAVA_EXT_FIELDS, "Signature": JAVA_SIGNATURE}
    with_token = sign_ext_fields(unsigned, JAVA_BODY, "RocketMQ", "12345678", security_token="tok")
    assert with_token["SecurityToken"] == "tok"
    assert with_token["Signature"] != JAVA_SIGNATURE   # the token is signed too


def test_content_is_sorted_values_then_body_without_the_signature():
    fields = {"b": "2", "Signature": "zzz", "a": "1", "C": "0"}
    assert signed_content(fields, b"BODY") == b"012BODY"
    assert signed_content(fields, None) == b"012"
    assert signed_content(fields, b"", leave_out=("Signature", "a")) == b"02"


def test_names_sort_by_utf16_units_as_java_treemap():
    # U+FF21 (BMP) sorts after U+1F600 (a surrogate pair starting 0xD83D) in Java, before it in Python.
    fields = {"\uff21": "bmp", "\U0001f600": "astral"}
    assert signed_content(fields, None) == b"astralbmp"


def test_signature_matches_is_exact():
    assert signature_matches(JAVA_SIGNATURE, JAVA_SIGNATURE)
    assert not signature_matches(JAVA_SIGNATURE, JAVA_SIGNATURE[:-1])
    assert not signature_matches(JAVA_SIGNATURE, None)
    assert not signature_matches(JAVA_SIGNATURE, "\udc80")


def test_signature_of_equals_the_two_steps():
    from pyrmq.common.acl.signature import signature_of
    assert signature_of(JAVA_EXT_FIELDS, memoryview(JAVA_BODY), "12345678") == JAVA_SIGNATURE
    assert signature_of({"a": "1"}, None, "k") == calculate_signature(b"1", "k")
