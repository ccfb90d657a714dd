"""The request signature of RocketMQ's ACL 1.0, as the official clients compute it.

The Java client's ``AclClientRPCHook`` (4.x in rocketmq-acl, 5.x in rocketmq-client; the Go and
C++ clients do the same) adds ``AccessKey`` (and ``SecurityToken`` when it has one) to the
request's extFields after the header fields, then signs: the values of every extField except
``Signature``, in the order of their names, concatenated and UTF-8 encoded, followed by the body
bytes; HMAC-SHA1 keyed with the UTF-8 secret key; Base64. The result goes in ``Signature``.

Names sort as Java's ``TreeMap<String, ...>`` sorts them: by UTF-16 code units, which differs
from Python's code point order only for characters beyond the BMP.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping

__all__ = ["ACCESS_KEY", "SECURITY_TOKEN", "SIGNATURE", "UNIQUE_KEY_QUERY", "calculate_signature",
           "sign_ext_fields", "signature_matches", "signature_of", "signed_content"]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
# MixAll.UNIQUE_MSG_QUERY_FLAG: added to QUERY_MESSAGE before the client signs; Apache's broker
# leaves it out of the content it verifies (see pyrmq.broker.acl.validator).
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def _java_order(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def _signed_values(ext_fields: Mapping[str, str], leave_out: Iterable[str]) -> bytes:
    skipped = set(leave_out)
    # Code point order is UTF-16 order unless a name holds characters past U+D7FF (rare).
    names = sorted(ext_fields) if "".join(ext_fields).isascii() else sorted(ext_fields, key=_java_order)
    return "".join(ext_fields[name] for name in names if name not in skipped).encode("utf-8", "surrogatepass")


def signed_content(ext_fields: Mapping[str, str], body: bytes | memoryview | None,
                   leave_out: Iterable[str] = (SIGNATURE,)) -> bytes:
    """What is signed: the sorted extField values (but ``leave_out``) and then the body."""
    content = _signed_values(ext_fields, leave_out)
    return content + bytes(body) if body else content


def calculate_signature(content: bytes, secret_key: str) -> str:
    """Base64 of HMAC-SHA1(secret_key, content), as ``AclSigner.calSignature``."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_of(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str,
                 leave_out: Iterable[str] = (SIGNATURE,)) -> str:
    """``calculate_signature(signed_content(...))`` without copying the body."""
    mac = hmac.new(secret_key.encode("utf-8"), _signed_values(ext_fields, leave_out), hashlib.sha1)
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def signature_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison, so timing tells a forger nothing about the right signature."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "surrogatepass"))


def sign_ext_fields(ext_fields: Mapping[str, str], body: bytes | None, access_key: str, secret_key: str,
                    security_token: str | None = None) -> dict[str, str]:
    """The extFields a client sends: ``ext_fields`` plus AccessKey, SecurityToken and Signature."""
    signed = dict(ext_fields)
    signed[ACCESS_KEY] = access_key
    if security_token is not None:
        signed[SECURITY_TOKEN] = security_token
    signed[SIGNATURE] = signature_of(signed, body, secret_key)
    return signed
