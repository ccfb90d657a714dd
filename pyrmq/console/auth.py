"""HTTP Basic for the console when the broker runs with ACL: an accessKey and secretKey of an
``admin: true`` account of plain_acl.yml, the same account the console then signs its remoting
requests with. The account table stays the broker's: the controller hands a look-up function in."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable

# accessKey -> the secretKey of that account when it is an admin account, else None
AdminSecretLookup = Callable[[str], "str | None"]

CHALLENGE = 'Basic realm="pyrmq console", charset="UTF-8"'


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic ...`` header; None when absent or malformed."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def admin_account(header: str | None, lookup: AdminSecretLookup) -> tuple[str, str] | None:
    """The (accessKey, secretKey) the header proves, when it names an admin account; else None.
    Compared in constant time, so timing tells nothing about the right secret."""
    credentials = basic_credentials(header)
    if credentials is None:
        return None
    access_key, secret_key = credentials
    expected = lookup(access_key)
    if expected is None:
        hmac.compare_digest(secret_key.encode(), secret_key.encode())   # the same work as a miss
        return None
    if not hmac.compare_digest(expected.encode("utf-8"), secret_key.encode("utf-8")):
        return None
    return access_key, secret_key
